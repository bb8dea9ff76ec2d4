//! The multi-unit experiment: an open-loop stream of reads and writes served over the
//! dies of a `PipelinedNand` simulator through a `paragc::Scheduler`, with garbage
//! collection running as queued moves and erases. Makespan and read latencies come
//! from the simulated clock.

use super::{Gen, Workload, BLOCKS, NONE, UNITS};
use nand_hal::sim::profile::Profile;
use nand_hal::sim::{FaultPlan, SimNand, TimingMode};
use nand_hal::{BlockAddr, NandFlash, PageAddr, PipelinedNand};
use paragc::sched::{Costs, Dispatch, EraseGate, OpKind, Order, Scheduler, Space};
use paragc::{
    BlockManager, Class, Classifier, GcMode, GcUrgency, Hint, ManagerConfig, UpdatePromotion,
};
use rand_core::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

const Q: usize = 256;

#[derive(Clone, Copy, Debug)]
enum Op {
    User { req: u32 },
    Move { src: u32 },
    Erase { block: u32 },
}

#[derive(Clone, Copy, Debug)]
struct Req {
    arrival: u64,
    lpn: u32,
    write: bool,
    hint: Hint,
}

/// Results of one run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParallelReport {
    pub makespan_ns: u64,
    pub read_p50_ns: u64,
    pub read_p99_ns: u64,
    pub reads: u32,
    pub writes: u32,
    pub moves: u64,
    pub erases: u64,
    pub misuse: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParallelSetup {
    /// Live data, per mille of raw pages.
    pub utilisation_permille: u32,
    pub requests: u32,
    /// Per mille of requests that are reads.
    pub read_permille: u32,
    /// Mean time between arrivals.
    pub interarrival_ns: u64,
    pub workload: Workload,
    pub order: Order,
    /// Array times drawn between datasheet typical and maximum (else typical).
    pub random_timing: bool,
}

struct Unit {
    gc_left: u32,
    victim: Option<BlockAddr>,
    running: Option<(Op, u64)>,
}

/// Runs `setup` on `profile` with dispatch `D` and erase gate `E`.
pub fn run_parallel<D: Dispatch, E: EraseGate>(
    profile: Profile,
    setup: ParallelSetup,
    dispatch: D,
    gate: E,
) -> ParallelReport {
    let g = profile.geometry;
    let t = profile.timing;
    let mut sim = SimNand::heap(profile, FaultPlan::seeded(3));
    if setup.random_timing {
        sim.set_timing_mode(TimingMode::Random);
    }
    let cfg = ManagerConfig {
        reserve_blocks: 3,
        background_blocks: 6,
    };
    let mut mgr: Box<BlockManager<BLOCKS, UNITS>> = Box::new(BlockManager::new(g, cfg).unwrap());
    let mut cls = UpdatePromotion;
    let units = g.dies();
    let page_bus = t.bus_ns(g.raw_page_size() as u64) as u32;
    let costs = Costs {
        read: t.cmd_read_ns + t.t_read.typ_ns + page_bus,
        write: t.cmd_program_ns + t.t_program.typ_ns + page_bus,
        erase: t.cmd_erase_ns + t.t_erase.typ_ns,
    };
    let mut sched: Box<Scheduler<UNITS, Q, D, E>> = Box::new(Scheduler::with_policies(
        units,
        costs,
        setup.order,
        dispatch,
        gate,
    ));
    let logical = (g.pages() as u64 * setup.utilisation_permille as u64 / 1000) as u32;
    let mut l2p = vec![NONE; logical as usize];
    let mut p2l = vec![NONE; g.pages() as usize];
    // Each page carries its logical page number, so the mapping is checked at the end.
    let mut data = vec![0x5Au8; g.page_size() as usize];
    let mut buf = vec![0u8; g.page_size() as usize];

    // Precondition (not measured): fill the logical space, striped, blocking.
    for lpn in 0..logical {
        let a = mgr.allocate_striped(Class::Cold).expect("fill fits");
        data[..4].copy_from_slice(&lpn.to_le_bytes());
        sim.program(a.page, 0, &data, &[]).unwrap();
        l2p[lpn as usize] = a.page.0;
        p2l[a.page.0 as usize] = lpn;
    }

    // The request stream.
    let mut gen = Gen::new(setup.workload, logical);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(setup.workload.seed ^ 0xA11);
    let start = sim.now_ns();
    let mut at = start;
    let reqs: Vec<Req> = (0..setup.requests)
        .map(|_| {
            // Exponential inter-arrival times (inverse CDF on a 32-bit uniform).
            let u = ((rng.next_u32() as f64) + 1.0) / 4_294_967_297.0;
            at += (-(u.ln()) * setup.interarrival_ns as f64) as u64;
            if rng.next_u32() % 1000 < setup.read_permille {
                Req {
                    arrival: at,
                    lpn: gen.any_page(),
                    write: false,
                    hint: Hint::Auto,
                }
            } else {
                let (lpn, hint) = gen.next_write();
                Req {
                    arrival: at,
                    lpn,
                    write: true,
                    hint,
                }
            }
        })
        .collect();

    let mut ops: Vec<Op> = Vec::new();
    let mut unit: Vec<Unit> = (0..units)
        .map(|_| Unit {
            gc_left: 0,
            victim: None,
            running: None,
        })
        .collect();
    let mut latencies: Vec<u64> = Vec::new();
    let mut next_req = 0usize;
    let mut done_reqs = 0usize;
    let mut last_done = start;
    let mut moves = 0u64;
    let mut erases = 0u64;
    let mut class_of_req: Vec<Class> = vec![Class::Warm; reqs.len()];

    while done_reqs < reqs.len() {
        let now = sim.now_ns();
        // Arrivals.
        while next_req < reqs.len() && reqs[next_req].arrival <= now {
            let r = reqs[next_req];
            let id = ops.len() as u32;
            if r.write {
                let old = l2p[r.lpn as usize];
                let prev = (old != NONE)
                    .then(|| mgr.block(g.block_of(PageAddr(old))).map(|b| b.class()))
                    .flatten();
                let class = cls.classify_write(r.lpn, r.hint, prev);
                class_of_req[next_req] = class;
                // Leave queue room for a victim's moves.
                let room: Vec<bool> = (0..units)
                    .map(|u| sched.queued(u, OpKind::Write) + g.pages_per_block() as usize + 1 < Q)
                    .collect();
                let m = &mgr;
                let ok = sched.submit_write(id, now, |u| {
                    room[u as usize]
                        && (m.head(u, class).is_some() || m.free_blocks(u) > cfg.reserve_blocks + 1)
                });
                if ok.is_err() {
                    break; // every unit is full: let GC catch up first
                }
            } else {
                let page = l2p[r.lpn as usize];
                let u = g.die_of(g.block_of(PageAddr(page))).index as u32;
                if sched.enqueue(u, OpKind::Read, id).is_err() {
                    break;
                }
            }
            ops.push(Op::User {
                req: next_req as u32,
            });
            next_req += 1;
        }
        // Completions.
        for u in 0..units {
            if let Some((op, done)) = unit[u as usize].running {
                if done <= now {
                    sim.wait_die(u).unwrap();
                    sched.notice_done(u);
                    unit[u as usize].running = None;
                    match op {
                        Op::User { .. } => {
                            done_reqs += 1;
                            last_done = last_done.max(done);
                        }
                        Op::Move { .. } => {
                            let s = &mut unit[u as usize];
                            s.gc_left -= 1;
                            if s.gc_left == 0 {
                                let b = s.victim.unwrap();
                                let id = ops.len() as u32;
                                ops.push(Op::Erase { block: b.0 });
                                sched.enqueue(u, OpKind::Erase, id).unwrap();
                            }
                        }
                        Op::Erase { block } => {
                            mgr.notice_block_erased(BlockAddr(block)).unwrap();
                            unit[u as usize].victim = None;
                            erases += 1;
                        }
                    }
                }
            }
        }
        // Garbage collection: one victim per unit at a time, as queued moves.
        for u in 0..units {
            let urg = mgr.gc_urgency(u);
            if urg == GcUrgency::None || unit[u as usize].victim.is_some() {
                continue;
            }
            let mode = if urg == GcUrgency::Foreground {
                GcMode::Foreground
            } else {
                GcMode::Background
            };
            let Some(v) = mgr.choose_victim(u, mode) else {
                continue;
            };
            unit[u as usize].victim = Some(v.block);
            let mut n = 0;
            for i in 0..v.written as u32 {
                let p = g.page(v.block, i).0;
                if p2l[p as usize] != NONE {
                    let id = ops.len() as u32;
                    ops.push(Op::Move { src: p });
                    sched.enqueue(u, OpKind::Write, id).unwrap();
                    n += 1;
                }
            }
            unit[u as usize].gc_left = n;
            if n == 0 {
                let id = ops.len() as u32;
                ops.push(Op::Erase { block: v.block.0 });
                sched.enqueue(u, OpKind::Erase, id).unwrap();
            }
        }
        // Issue.
        let mut issued = false;
        for u in 0..units {
            if unit[u as usize].running.is_some() {
                continue;
            }
            let now = sim.now_ns();
            let space = Space {
                free_permille: mgr.free_blocks(u) * 1000 / g.blocks_per_die(),
                urgent: mgr.gc_urgency(u) == GcUrgency::Foreground,
            };
            let Some(iss) = sched.next(u, now, space) else {
                continue;
            };
            issued = true;
            let op = ops[iss.tag as usize];
            match (iss.kind, op) {
                (OpKind::Read, Op::User { req }) => {
                    let r = reqs[req as usize];
                    let page = l2p[r.lpn as usize];
                    let home = g.die_of(g.block_of(PageAddr(page))).index as u32;
                    if home != u {
                        // Moved by GC since it was queued: follow it.
                        sched.notice_done(u);
                        sched.enqueue(home, OpKind::Read, iss.tag).unwrap();
                        continue;
                    }
                    sim.read(PageAddr(page), 0, &mut buf, &mut []).unwrap();
                    let done = sim.now_ns();
                    latencies.push(done - r.arrival);
                    unit[u as usize].running = Some((op, done));
                }
                (OpKind::Write, Op::User { req }) => {
                    let r = reqs[req as usize];
                    let class = class_of_req[req as usize];
                    // Dispatched when the unit had room; if GC has not caught up, dip into
                    // the reserve but leave the last block for GC moves, else retry later.
                    let a = match mgr.allocate(u, class) {
                        Ok(a) => a,
                        Err(_) if mgr.free_blocks(u) > 1 => {
                            mgr.allocate_for_gc(u, class).expect("free block")
                        }
                        Err(_) => {
                            sched.notice_done(u);
                            sched.enqueue(u, OpKind::Write, iss.tag).unwrap();
                            continue;
                        }
                    };
                    data[..4].copy_from_slice(&r.lpn.to_le_bytes());
                    sim.start_program(a.page, 0, &data, &[]).unwrap();
                    let old = l2p[r.lpn as usize];
                    if old != NONE {
                        p2l[old as usize] = NONE;
                        mgr.notice_page_invalidated(g.block_of(PageAddr(old)))
                            .unwrap();
                    }
                    l2p[r.lpn as usize] = a.page.0;
                    p2l[a.page.0 as usize] = r.lpn;
                    unit[u as usize].running = Some((op, sim.die_busy_until(u)));
                }
                (OpKind::Write, Op::Move { src }) => {
                    let lpn = p2l[src as usize];
                    if lpn == NONE {
                        // Overwritten while queued: nothing to move.
                        sched.notice_done(u);
                        let s = &mut unit[u as usize];
                        s.gc_left -= 1;
                        if s.gc_left == 0 {
                            let b = s.victim.unwrap();
                            let id = ops.len() as u32;
                            ops.push(Op::Erase { block: b.0 });
                            sched.enqueue(u, OpKind::Erase, id).unwrap();
                        }
                        continue;
                    }
                    sim.read(PageAddr(src), 0, &mut buf, &mut []).unwrap();
                    let vb = g.block_of(PageAddr(src));
                    let class = mgr.block(vb).unwrap().class().relocated();
                    let a = mgr.allocate_for_gc(u, class).expect("GC reserve");
                    sim.start_program(a.page, 0, &buf, &[]).unwrap();
                    p2l[src as usize] = NONE;
                    mgr.notice_page_invalidated(vb).unwrap();
                    l2p[lpn as usize] = a.page.0;
                    p2l[a.page.0 as usize] = lpn;
                    moves += 1;
                    unit[u as usize].running = Some((op, sim.die_busy_until(u)));
                }
                (OpKind::Erase, Op::Erase { block }) => {
                    sim.start_erase(BlockAddr(block)).unwrap();
                    unit[u as usize].running = Some((op, sim.die_busy_until(u)));
                }
                (k, o) => panic!("scheduler returned {k:?} for {o:?}"),
            }
        }
        if !issued {
            // Idle until the next arrival or completion.
            // An arrival already due is blocked on full queues: wait for a completion.
            let now = sim.now_ns();
            let next_arrival = reqs
                .get(next_req)
                .map(|r| r.arrival)
                .filter(|&a| a > now)
                .unwrap_or(u64::MAX);
            let next_done = unit
                .iter()
                .filter_map(|s| s.running.map(|(_, d)| d))
                .min()
                .unwrap_or(u64::MAX);
            let to = next_arrival.min(next_done);
            if to == u64::MAX {
                if done_reqs == reqs.len() {
                    break;
                }
                panic!("stalled with {} requests left", reqs.len() - done_reqs);
            }
            if to > now {
                sim.advance(to - now);
            }
        }
    }
    sim.wait_all().unwrap();
    // Every logical page reads back from where the map says (after the measurement).
    for (lpn, &page) in l2p.iter().enumerate() {
        sim.read(PageAddr(page), 0, &mut buf, &mut []).unwrap();
        assert_eq!(buf[..4], (lpn as u32).to_le_bytes(), "logical page {lpn}");
        assert_eq!(p2l[page as usize], lpn as u32);
    }
    latencies.sort_unstable();
    let pct = |p: usize| {
        if latencies.is_empty() {
            0
        } else {
            latencies[(latencies.len() * p / 100).min(latencies.len() - 1)]
        }
    };
    ParallelReport {
        makespan_ns: last_done - start,
        read_p50_ns: pct(50),
        read_p99_ns: pct(99),
        reads: latencies.len() as u32,
        writes: reqs.iter().filter(|r| r.write).count() as u32,
        moves,
        erases,
        misuse: sim.counters().misuse,
    }
}
