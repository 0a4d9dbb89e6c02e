//! Std locks taken back from poison. A panic while a lock is held poisons it, and unwrapping every
//! later `lock()` would take every later request down with the one that panicked. The data under
//! these locks is kept consistent by each critical section, so the guard is taken back from the
//! poison and used as it is.

use std::sync::{Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// [`Mutex::lock`] that recovers the guard of a poisoned mutex.
pub trait MutexRecovery<T: ?Sized> {
    /// Locks the mutex, taking the guard back if a panic poisoned it.
    fn lock_recovered(&self) -> MutexGuard<'_, T>;
}

impl<T: ?Sized> MutexRecovery<T> for Mutex<T> {
    #[inline]
    fn lock_recovered(&self) -> MutexGuard<'_, T> {
        self.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// [`RwLock::read`] and [`RwLock::write`] that recover the guard of a poisoned lock.
pub trait RwLockRecovery<T: ?Sized> {
    /// Locks for reading, taking the guard back if a panic poisoned the lock.
    fn read_recovered(&self) -> RwLockReadGuard<'_, T>;
    /// Locks for writing, taking the guard back if a panic poisoned the lock.
    fn write_recovered(&self) -> RwLockWriteGuard<'_, T>;
}

impl<T: ?Sized> RwLockRecovery<T> for RwLock<T> {
    #[inline]
    fn read_recovered(&self) -> RwLockReadGuard<'_, T> {
        self.read().unwrap_or_else(PoisonError::into_inner)
    }

    #[inline]
    fn write_recovered(&self) -> RwLockWriteGuard<'_, T> {
        self.write().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex, RwLock};
    use std::thread;

    use super::{MutexRecovery, RwLockRecovery};

    #[test]
    fn a_poisoned_mutex_is_locked_and_holds_its_value() {
        let m = Arc::new(Mutex::new(7));
        let held = Arc::clone(&m);
        let panicked = thread::spawn(move || {
            let mut g = held.lock().unwrap();
            *g = 8;
            panic!("poisons the mutex");
        })
        .join();
        assert!(panicked.is_err());
        assert!(m.is_poisoned());
        assert_eq!(*m.lock_recovered(), 8);
        *m.lock_recovered() += 1;
        assert_eq!(*m.lock_recovered(), 9);
    }

    #[test]
    fn a_poisoned_rwlock_is_read_and_written_and_holds_its_value() {
        let l = Arc::new(RwLock::new(vec![1]));
        let held = Arc::clone(&l);
        let panicked = thread::spawn(move || {
            held.write().unwrap().push(2);
            let _g = held.write().unwrap();
            panic!("poisons the lock");
        })
        .join();
        assert!(panicked.is_err());
        assert!(l.is_poisoned());
        assert_eq!(*l.read_recovered(), [1, 2]);
        l.write_recovered().push(3);
        assert_eq!(*l.read_recovered(), [1, 2, 3]);
    }
}
