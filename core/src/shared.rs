//! A [`Table`] that interrupt handlers and tasks can share: behind a
//! `critical_section::Mutex`, so the core depends on the critical-section
//! facade only and the application picks the implementation (a single-core
//! Cortex-M, an RTOS, or `std` in tests).

use crate::name::NAME_CAPACITY;
use core::cell::RefCell;
use core::fmt;

use critical_section::Mutex;

use crate::table::Table;

/// The table was already borrowed: a `with` call nested inside another on
/// the same table. Nothing was run.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Busy;

impl fmt::Display for Busy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("shared table already in use by an enclosing call")
    }
}

impl core::error::Error for Busy {}

/// A [`Table`] behind a critical section.
///
/// ```
/// use grace_core::{SharedTable, Table};
///
/// static TABLE: SharedTable<16> = SharedTable::new();
///
/// let len = TABLE.with(|table: &mut Table<16>| table.len()).unwrap();
/// assert_eq!(len, 0);
/// ```
pub struct SharedTable<
    const N: usize,
    const F: usize = 4,
    const C: usize = 4,
    const L: usize = NAME_CAPACITY,
> {
    table: Mutex<RefCell<Table<N, F, C, L>>>,
}

impl<const N: usize, const F: usize, const C: usize, const L: usize> fmt::Debug
    for SharedTable<N, F, C, L>
{
    /// The table's length and capacity, read in a critical section (or
    /// `in use` while a `with` call holds it).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let len = self.with(|table| table.len());
        let mut out = f.debug_struct("SharedTable");
        match len {
            Ok(len) => out.field("len", &len),
            Err(Busy) => out.field("len", &format_args!("in use")),
        };
        out.field("capacity", &N).finish()
    }
}

impl<const N: usize, const F: usize, const C: usize, const L: usize> Default
    for SharedTable<N, F, C, L>
{
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize, const F: usize, const C: usize, const L: usize> SharedTable<N, F, C, L> {
    /// An empty shared table; `const`, for a `static`.
    pub const fn new() -> Self {
        SharedTable {
            table: Mutex::new(RefCell::new(Table::new())),
        }
    }

    /// Runs `f` on the table inside a critical section. Keep `f` short: it
    /// holds off interrupts (on a single core) for its whole run. A call
    /// nested inside another on the same table gets [`Busy`] instead of a
    /// panic.
    pub fn with<R>(&self, f: impl FnOnce(&mut Table<N, F, C, L>) -> R) -> Result<R, Busy> {
        critical_section::with(|cs| {
            let mut table = self.table.borrow(cs).try_borrow_mut().map_err(|_| Busy)?;
            Ok(f(&mut table))
        })
    }
}

/// A table to work on through short, synchronous accesses: one owned
/// outright, or a shared one (each access is then a critical section).
/// The embassy driver and the flash store take either.
pub trait TableAccess<const N: usize, const F: usize, const C: usize> {
    /// Runs `f` on the table ([`Busy`] only for a shared table already
    /// borrowed by an enclosing call).
    fn access<R>(&mut self, f: impl FnOnce(&mut Table<N, F, C>) -> R) -> Result<R, Busy>;
}

impl<const N: usize, const F: usize, const C: usize> TableAccess<N, F, C> for Table<N, F, C> {
    fn access<R>(&mut self, f: impl FnOnce(&mut Table<N, F, C>) -> R) -> Result<R, Busy> {
        Ok(f(self))
    }
}

impl<const N: usize, const F: usize, const C: usize> TableAccess<N, F, C> for &mut Table<N, F, C> {
    fn access<R>(&mut self, f: impl FnOnce(&mut Table<N, F, C>) -> R) -> Result<R, Busy> {
        Ok(f(self))
    }
}

impl<const N: usize, const F: usize, const C: usize> TableAccess<N, F, C>
    for &SharedTable<N, F, C>
{
    fn access<R>(&mut self, f: impl FnOnce(&mut Table<N, F, C>) -> R) -> Result<R, Busy> {
        self.with(f)
    }
}
