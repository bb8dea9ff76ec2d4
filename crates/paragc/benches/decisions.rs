//! Host CPU cost of each policy decision (criterion). The work per decision is bounded
//! (see the crate docs); these numbers show what the bounds cost in practice on a
//! 1024-block part (one unit) and an 8-die part (256 blocks per unit).

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use nand_hal::Geometry;
use paragc::sched::{Costs, OpKind, Order, Scheduler, Space};
use paragc::{
    BlockManager, Class, Classifier, GcMode, Hint, HotnessTracker, ManagerConfig, UpdatePromotion,
};

const ONE_DIE: Geometry = Geometry::new(2048, 64, 64, 1024, 1, 1, 1);
const EIGHT_DIES: Geometry = Geometry::new(2048, 64, 64, 256, 1, 2, 4);

/// A manager with every block of the device written and a spread of valid counts.
fn aged(g: Geometry) -> Box<BlockManager<2048, 8>> {
    let mut m = Box::new(BlockManager::<2048, 8>::new(g, ManagerConfig::DEFAULT).unwrap());
    let mut x = 1u32;
    'fill: loop {
        for u in 0..m.units() {
            match m.allocate(u, Class::ALL[(x % 3) as usize]) {
                Ok(a) => {
                    x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
                    if x % 3 == 0 {
                        m.notice_page_invalidated(a.block).unwrap();
                    }
                }
                Err(_) => break 'fill,
            }
        }
    }
    m
}

fn manager(c: &mut Criterion) {
    for (name, g) in [("1x1024", ONE_DIE), ("8x256", EIGHT_DIES)] {
        let m = aged(g);
        c.bench_function(&format!("victim/greedy/{name}"), |b| {
            b.iter(|| black_box(m.peek_victim(black_box(0), GcMode::Foreground)))
        });
        c.bench_function(&format!("victim/cost-benefit/{name}"), |b| {
            b.iter(|| black_box(m.peek_victim(black_box(0), GcMode::Background)))
        });
        c.bench_function(&format!("wear/static-check/{name}"), |b| {
            b.iter_batched(
                || m.clone(),
                |mut m| black_box(m.static_wear_victim()),
                criterion::BatchSize::LargeInput,
            )
        });
        let fresh = Box::new(BlockManager::<2048, 8>::new(g, ManagerConfig::DEFAULT).unwrap());
        c.bench_function(&format!("allocate/64-pages-incl-open/{name}"), |b| {
            b.iter_batched(
                || fresh.clone(),
                |mut m| {
                    for _ in 0..64 {
                        black_box(m.allocate(0, Class::Hot).unwrap());
                    }
                    m
                },
                criterion::BatchSize::LargeInput,
            )
        });
    }
}

fn hotness(c: &mut Criterion) {
    let mut t = Box::new(HotnessTracker::<16384>::new(3, 2));
    let mut k = 0u32;
    c.bench_function("classify/tracker-16k", |b| {
        b.iter(|| {
            k = k.wrapping_add(7919);
            black_box(t.classify_write(k % 10_000, Hint::Auto, None))
        })
    });
    let mut p = UpdatePromotion;
    c.bench_function("classify/update-promotion", |b| {
        b.iter(|| black_box(p.classify_write(1, Hint::Auto, black_box(Some(Class::Warm)))))
    });
}

fn scheduler(c: &mut Criterion) {
    let costs = Costs {
        read: 66_000,
        write: 291_000,
        erase: 2_000_000,
    };
    let mut s: Box<Scheduler<8, 64>> = Box::new(Scheduler::new(8, costs, Order::Sliced { len: 4 }));
    let space = Space {
        free_permille: 100,
        urgent: false,
    };
    let mut now = 0u64;
    c.bench_function("sched/dispatch-write+issue/8-units", |b| {
        b.iter(|| {
            now += 40_000;
            let u = s.submit_write(1, now, |_| true).unwrap();
            let i = s.next(u, now, space);
            s.notice_done(u);
            black_box(i)
        })
    });
    c.bench_function("sched/enqueue-read+issue/8-units", |b| {
        b.iter(|| {
            s.enqueue(3, OpKind::Read, 1).unwrap();
            let i = s.next(3, now, space);
            s.notice_done(3);
            black_box(i)
        })
    });
}

criterion_group!(benches, manager, hotness, scheduler);
criterion_main!(benches);
