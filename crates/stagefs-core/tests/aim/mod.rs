//! The fault-aiming flash wrapper and the volume images of the stop 36/37 reviews
//! (`review_s36b.rs`, `review_s37b.rs`), shared by both.
//!
//! `Aim` is a thin `NandFlash` wrapper over the simulator that counts the programs and
//! erases the store issues and, at the k-th one, sets the simulator's
//! `fail_next_program`/`fail_next_erase` on that operation's block (so the simulator
//! leaves one of its real failure shapes); read runs use the simulator's
//! `read_fail_at`. `base_image` is a volume with inline and object files and records
//! waiting in its staging log; `stuck_image` is review s36b's finding built on it.

#![allow(dead_code)]

use std::cell::RefCell;
use std::rc::Rc;

use nand_hal::powerloss::Sim;
use nand_hal::sim::{profile, CutKind, FaultPlan, SimError, SimNand, TornMode};
use nand_hal::{
    BlockAddr, Capabilities, ErrorType, Geometry, NandFlash, PageAddr, ReadReport, StepReport,
};
use oftl::{Config, Greedy, Oftl};
use stagefs_core::oracle::{observe, Node, Tree};
use stagefs_core::{Error, Fs, OpenOptions};

pub type E = SimError;

#[derive(Default)]
pub struct Ctl {
    pub progs: u64,
    pub erases: u64,
    /// Fail the program whose count reaches this (0: off).
    pub fail_prog: u64,
    /// Fail the erase whose count reaches this (0: off).
    pub fail_erase: u64,
    /// A plan to arm on the simulator before the next flash call.
    pub arm: Option<FaultPlan>,
    /// Reads since the plan was last armed (sampled by `sample_reads`).
    pub reads: u64,
    pub sample: bool,
    pub trace: bool,
    pub trace_ops: bool,
    /// Cut the power at the next program/erase after this many (0: off).
    pub hits: Vec<String>,
}

pub struct Aim<'a> {
    pub sim: &'a mut Sim,
    pub ctl: Rc<RefCell<Ctl>>,
}

impl Aim<'_> {
    fn pre(&mut self) {
        let mut c = self.ctl.borrow_mut();
        if let Some(p) = c.arm.take() {
            self.sim.arm(p);
        }
    }
    fn post(&mut self) {
        let mut c = self.ctl.borrow_mut();
        if c.trace {
            let n = self.sim.reads_since_arm();
            let st = self.sim.plan().faults;
            if n + 1 >= st.read_fail_at as u64
                && st.read_fail_at != 0
                && n <= (st.read_fail_at + st.read_fail_len) as u64 + 2
            {
                eprintln!(
                    "   read #{n} {}",
                    std::backtrace::Backtrace::force_capture()
                        .to_string()
                        .lines()
                        .filter(|l| l.contains("oftl::") || l.contains("stagefs_core::"))
                        .take(6)
                        .collect::<Vec<_>>()
                        .join(" <- ")
                );
            }
        }
        if c.sample {
            c.reads = self.sim.reads_since_arm();
        }
    }
}

impl ErrorType for Aim<'_> {
    type Error = SimError;
}

impl NandFlash for Aim<'_> {
    fn geometry(&self) -> Geometry {
        self.sim.geometry()
    }
    fn capabilities(&self) -> &Capabilities {
        self.sim.capabilities()
    }
    fn read(
        &mut self,
        page: PageAddr,
        column: u32,
        data: &mut [u8],
        oob: &mut [u8],
    ) -> Result<ReadReport, E> {
        self.pre();
        let r = self.sim.read(page, column, data, oob);
        self.post();
        r
    }
    fn read_steps(
        &mut self,
        page: PageAddr,
        data: &mut [u8],
        oob: &mut [u8],
    ) -> Result<StepReport, E> {
        self.pre();
        let r = self.sim.read_steps(page, data, oob);
        self.post();
        r
    }
    fn delivers_good_steps(&self) -> bool {
        self.sim.delivers_good_steps()
    }
    fn program(&mut self, page: PageAddr, column: u32, data: &[u8], oob: &[u8]) -> Result<(), E> {
        self.pre();
        {
            let mut c = self.ctl.borrow_mut();
            c.progs += 1;
            if c.trace_ops {
                eprintln!(
                    "   op prog p{} (b{})",
                    page.0,
                    self.sim.geometry().block_of(page).0
                );
            }
            if c.fail_prog != 0 && c.progs == c.fail_prog {
                let b = self.sim.geometry().block_of(page);
                self.sim.fail_next_program(b);
                c.hits.push(format!("prog p{} b{}", page.0, b.0));
            }
        }
        self.sim.program(page, column, data, oob)
    }
    fn erase(&mut self, block: BlockAddr) -> Result<(), E> {
        self.pre();
        {
            let mut c = self.ctl.borrow_mut();
            c.erases += 1;
            if c.trace_ops {
                eprintln!("   op erase b{}", block.0);
            }
            if c.fail_erase != 0 && c.erases == c.fail_erase {
                self.sim.fail_next_erase(block);
                c.hits.push(format!("erase b{}", block.0));
            }
        }
        self.sim.erase(block)
    }
    fn is_bad(&mut self, block: BlockAddr) -> Result<bool, E> {
        self.pre();
        let r = self.sim.is_bad(block);
        self.post();
        r
    }
    fn mark_bad(&mut self, block: BlockAddr) -> Result<(), E> {
        self.pre();
        self.sim.mark_bad(block)
    }
}

pub type St<'a> = Oftl<Aim<'a>, 2048, 64, 4>;
pub type V<'a> = Fs<St<'a>, 2048, 4>;

pub fn cfg() -> Config {
    Config {
        window_blocks: 6,
        format_id: 36,
        ..Default::default()
    }
}

pub fn vol(sim: &mut Sim, ctl: Rc<RefCell<Ctl>>) -> V<'_> {
    Fs::new(Oftl::new(Aim { sim, ctl }, cfg(), Greedy::DEFAULT))
}

pub fn clean_plan(seed: u64) -> FaultPlan {
    FaultPlan::seeded(seed)
}

pub fn crash(sim: &mut Sim) {
    sim.cut_power();
    sim.power_on();
    sim.arm(clean_plan(sim.plan().seed));
}

pub fn pat(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| {
            (i as u32)
                .wrapping_mul(2654435761)
                .wrapping_add(seed as u32) as u8
        })
        .collect()
}

pub fn rw() -> OpenOptions {
    OpenOptions::new().read(true).write(true)
}

pub fn put(fs: &mut V<'_>, p: &str, data: &[u8]) -> Result<(), Error<E>> {
    let f = fs.open(p, rw().create(true).truncate(true))?;
    fs.write(f, data)?;
    fs.close(f)
}

pub fn append_fsync(fs: &mut V<'_>, p: &str, data: &[u8]) -> Result<(), Error<E>> {
    let f = fs.open(p, OpenOptions::new().append(true))?;
    fs.write(f, data)?;
    let r = fs.fsync(f);
    let c = fs.close(f);
    r.and(c)
}

pub fn diff(seen: &Tree, want: &Tree) -> String {
    let mut d = Vec::new();
    for (k, v) in want {
        match (seen.get(k), v) {
            (None, _) => d.push(format!("missing {k}")),
            (Some(Node::File(x)), Node::File(y)) if x != y => {
                let first = x.iter().zip(y).position(|(a, b)| a != b);
                d.push(format!(
                    "differs {k}: len {} vs {} (first diff {first:?})",
                    x.len(),
                    y.len()
                ))
            }
            (Some(x), y) if x != y => d.push(format!("differs {k}: kind")),
            _ => {}
        }
    }
    for k in seen.keys() {
        if !want.contains_key(k) {
            d.push(format!("extra {k}"));
        }
    }
    d.join("; ")
}

/// A formatted volume with inline and object files, a directory, and staged records
/// left in the log by a crash (the next mount replays them).
pub fn base_image(seed: u64) -> Sim {
    let mut sim = SimNand::heap(profile::TINY, clean_plan(seed));
    {
        let ctl = Rc::new(RefCell::new(Ctl::default()));
        let mut fs = vol(&mut sim, ctl);
        fs.format().unwrap();
        put(&mut fs, "/a", &pat(3000, 1)).unwrap();
        put(&mut fs, "/c", &pat(2500, 2)).unwrap();
        put(&mut fs, "/s", &pat(100, 3)).unwrap();
        put(&mut fs, "/b", &pat(50, 4)).unwrap();
        fs.create_dir("/d").unwrap();
        put(&mut fs, "/d/x", &pat(30, 5)).unwrap();
        put(&mut fs, "/d/y", &pat(4200, 6)).unwrap();
        fs.unmount().unwrap();
        let mut fs = vol(&mut sim, Rc::new(RefCell::new(Ctl::default())));
        fs.mount().unwrap();
        append_fsync(&mut fs, "/a", &pat(64, 7)).unwrap();
        append_fsync(&mut fs, "/d/y", &pat(64, 8)).unwrap();
        append_fsync(&mut fs, "/s", &pat(20, 9)).unwrap();
        // Dropped without unmount: the records wait in the staging log.
    }
    crash(&mut sim);
    sim
}

/// In-session writes every scenario starts with: records staged in the live session.
pub fn staged_prelude(fs: &mut V<'_>) {
    append_fsync(fs, "/c", &pat(64, 10)).unwrap();
    append_fsync(fs, "/b", &pat(16, 11)).unwrap();
    let n = CHURN.with(|c| *c.borrow());
    for i in 0..n {
        match i % 4 {
            0 => put(fs, "/t", &pat(1500 + (i as usize % 7) * 300, i as u8)).unwrap(),
            1 => append_fsync(fs, "/t", &pat(64, i as u8)).unwrap(),
            2 => put(fs, "/u", &pat(40 + i as usize % 100, i as u8)).unwrap(),
            _ => append_fsync(fs, "/d/y", &pat(0, 0)).unwrap(),
        }
    }
}

thread_local! {
    /// Extra operations the prelude runs (moves the target across log and block
    /// boundaries, collections, checkpoints).
    pub static CHURN: RefCell<u32> = const { RefCell::new(0) };
}

/// target).
pub fn before_tree(base: &Sim) -> Tree {
    let mut sim = base.clone();
    let mut fs = vol(&mut sim, Rc::new(RefCell::new(Ctl::default())));
    fs.mount().unwrap();
    staged_prelude(&mut fs);
    observe(&mut fs).unwrap()
}

/// Review s36b's finding, on `base_image(0x36b)` with no churn: one failed checkpoint
/// program during `sync` (retried: `Ok`), a cut, and a torn (random) erase of another
/// checkpoint block during the next recovery leave two of TINY's four checkpoint blocks
/// good, an unmarked checkpoint and its spare. Returns the image (crashed) and the tree
/// every mount of it must show.
pub fn stuck_image() -> (Sim, Tree) {
    CHURN.with(|c| *c.borrow_mut() = 0);
    let base = base_image(0x36b);
    let before = before_tree(&base);
    let mut sim = base.clone();
    {
        let ctl = Rc::new(RefCell::new(Ctl::default()));
        let mut fs = vol(&mut sim, ctl.clone());
        fs.mount().unwrap();
        staged_prelude(&mut fs);
        {
            let mut c = ctl.borrow_mut();
            c.fail_prog = c.progs + 8;
        }
        assert_eq!(fs.sync(), Ok(()), "the failed program is retried");
        assert_eq!(ctl.borrow().hits.len(), 1, "the program failure fired");
    }
    crash(&mut sim);
    {
        let ctl = Rc::new(RefCell::new(Ctl::default()));
        ctl.borrow_mut().arm = Some(clean_plan(5).with_cut(3, CutKind::Torn(TornMode::Random)));
        let mut fs = vol(&mut sim, ctl);
        assert!(fs.mount().is_err(), "the cut hit the recovery");
    }
    crash(&mut sim);
    (sim, before)
}
