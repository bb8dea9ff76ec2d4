//! Operation counters and simulated time. Take a snapshot before and after a workload
//! and subtract them.

use core::ops::Sub;

/// Cumulative counters of a simulated device. `later - earlier` gives the work in
/// between (time included).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Counters {
    /// Read operations (any size).
    pub reads: u64,
    /// Reads that moved spare bytes only.
    pub oob_reads: u64,
    /// Program operations (full and partial).
    pub programs: u64,
    /// Program operations that covered less than the whole data area.
    pub partial_programs: u64,
    /// Erase operations (attempts included).
    pub erases: u64,
    /// Data-area bytes moved to the host by reads.
    pub bytes_read: u64,
    /// Data-area bytes carried by program operations (the write-amplification numerator).
    pub bytes_programmed: u64,
    /// Spare bytes carried by program operations.
    pub oob_bytes_programmed: u64,
    /// All bytes moved over the bus, both directions.
    pub bus_bytes: u64,
    /// Reads whose ECC corrected at least one bit.
    pub corrected_reads: u64,
    /// Reads that failed as uncorrectable.
    pub uncorrectable_reads: u64,
    /// Programs that reported failure.
    pub program_failures: u64,
    /// Erases that reported failure.
    pub erase_failures: u64,
    /// Contract violations by the caller (each also returned as a Misuse error).
    pub misuse: u64,
    /// Power cuts.
    pub power_cuts: u64,
    /// Simulated time in nanoseconds.
    pub time_ns: u64,
}

impl Counters {
    /// Program operations divided by `user_bytes / page_size`: how many pages were
    /// programmed per page of user data.
    pub fn program_amplification(&self, user_bytes: u64, page_size: u32) -> f64 {
        if user_bytes == 0 {
            return 0.0;
        }
        self.programs as f64 / (user_bytes as f64 / page_size as f64)
    }

    /// Bytes programmed per user byte.
    pub fn write_amplification(&self, user_bytes: u64) -> f64 {
        if user_bytes == 0 {
            return 0.0;
        }
        self.bytes_programmed as f64 / user_bytes as f64
    }

    /// `bytes` per simulated second.
    pub fn throughput(&self, bytes: u64) -> f64 {
        if self.time_ns == 0 {
            return 0.0;
        }
        bytes as f64 * 1e9 / self.time_ns as f64
    }
}

impl Sub for Counters {
    type Output = Counters;

    fn sub(self, o: Counters) -> Counters {
        Counters {
            reads: self.reads.saturating_sub(o.reads),
            oob_reads: self.oob_reads.saturating_sub(o.oob_reads),
            programs: self.programs.saturating_sub(o.programs),
            partial_programs: self.partial_programs.saturating_sub(o.partial_programs),
            erases: self.erases.saturating_sub(o.erases),
            bytes_read: self.bytes_read.saturating_sub(o.bytes_read),
            bytes_programmed: self.bytes_programmed.saturating_sub(o.bytes_programmed),
            oob_bytes_programmed: self
                .oob_bytes_programmed
                .saturating_sub(o.oob_bytes_programmed),
            bus_bytes: self.bus_bytes.saturating_sub(o.bus_bytes),
            corrected_reads: self.corrected_reads.saturating_sub(o.corrected_reads),
            uncorrectable_reads: self
                .uncorrectable_reads
                .saturating_sub(o.uncorrectable_reads),
            program_failures: self.program_failures.saturating_sub(o.program_failures),
            erase_failures: self.erase_failures.saturating_sub(o.erase_failures),
            misuse: self.misuse.saturating_sub(o.misuse),
            power_cuts: self.power_cuts.saturating_sub(o.power_cuts),
            time_ns: self.time_ns.saturating_sub(o.time_ns),
        }
    }
}

/// Erase-count spread over a device's good blocks.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct WearStats {
    /// Fewest erases of any good block.
    pub min: u32,
    /// Most erases of any good block.
    pub max: u32,
    /// Mean erases per good block.
    pub mean: f64,
}

impl WearStats {
    /// `max / mean` (1.0 is perfect levelling); 0 when nothing was erased.
    pub fn max_over_mean(&self) -> f64 {
        if self.mean == 0.0 {
            0.0
        } else {
            self.max as f64 / self.mean
        }
    }
}
