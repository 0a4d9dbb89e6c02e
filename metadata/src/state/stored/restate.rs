//! Conversions between the stored layouts and the in-memory types. [`Restate`] converts a field
//! of either into the other, through containers; [`stored_layout!`] writes both conversions of
//! a struct from its field names, so a field added to either side does not compile until it is
//! named there.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// A value as the other side holds it: a stored layout as its in-memory type or back. Values
/// with one form for both (numbers, strings, vocabulary enums, messages kept as sent) are
/// themselves.
pub(crate) trait Restate<T> {
    fn restate(self) -> T;
}

/// `From` both ways between a stored struct and its in-memory type, naming every field, and
/// [`Restate`] between them.
macro_rules! stored_layout {
    ($stored:ident <=> $($memory:ident)::+ { $($field:ident),+ $(,)? }) => {
        impl From<$($memory)::+> for $stored {
            fn from(value: $($memory)::+) -> Self {
                let $($memory)::+ { $($field),+ } = value;
                Self { $($field: $crate::state::stored::Restate::restate($field)),+ }
            }
        }

        impl From<$stored> for $($memory)::+ {
            fn from(value: $stored) -> Self {
                let $stored { $($field),+ } = value;
                Self { $($field: $crate::state::stored::Restate::restate($field)),+ }
            }
        }

        $crate::state::stored::restate_via_from!($stored <=> $($memory)::+);
    };
    // With fields held in memory only, rebuilt from the stored ones by `$rebuild` after a load.
    ($stored:ident <=> $($memory:ident)::+ { $($field:ident),+ $(,)? } derived { $($derived:ident),+ $(,)? } by $rebuild:path) => {
        impl From<$($memory)::+> for $stored {
            fn from(value: $($memory)::+) -> Self {
                let $($memory)::+ { $($field),+, $($derived: _),+ } = value;
                Self { $($field: $crate::state::stored::Restate::restate($field)),+ }
            }
        }

        impl From<$stored> for $($memory)::+ {
            fn from(value: $stored) -> Self {
                let $stored { $($field),+ } = value;
                let mut value = Self {
                    $($field: $crate::state::stored::Restate::restate($field)),+,
                    $($derived: Default::default()),+
                };
                $rebuild(&mut value);
                value
            }
        }

        $crate::state::stored::restate_via_from!($stored <=> $($memory)::+);
    };
}

/// [`Restate`] both ways between two types that convert with `From`.
macro_rules! restate_via_from {
    ($stored:ident <=> $($memory:ident)::+) => {
        impl $crate::state::stored::Restate<$stored> for $($memory)::+ {
            fn restate(self) -> $stored {
                self.into()
            }
        }

        impl $crate::state::stored::Restate<$($memory)::+> for $stored {
            fn restate(self) -> $($memory)::+ {
                self.into()
            }
        }
    };
}

/// Types with one form in memory and on disk.
macro_rules! restate_as_itself {
    ($($ty:ty),+ $(,)?) => {
        $(impl Restate<$ty> for $ty {
            fn restate(self) -> $ty {
                self
            }
        })+
    };
}

pub(crate) use {restate_via_from, stored_layout};

restate_as_itself!(
    bool,
    u8,
    i16,
    i32,
    u32,
    i64,
    u64,
    String,
    uuid::Uuid,
    [u8; 16],
    crate::acl::AclOperation,
    crate::acl::AclPatternType,
    crate::acl::AclPermission,
    crate::acl::AclResourceType,
    crate::state::GroupKind,
    crate::state::Compatibility,
    crate::state::RegistryMode,
    crate::state::SchemaType,
    crate::state::ScramMechanism,
    crate::state::Meter,
    u16,
    crate::command::CommandError,
);

impl<T: Restate<U>, U> Restate<Vec<U>> for Vec<T> {
    fn restate(self) -> Vec<U> {
        self.into_iter().map(Restate::restate).collect()
    }
}

impl<T: Restate<U>, U> Restate<VecDeque<U>> for VecDeque<T> {
    fn restate(self) -> VecDeque<U> {
        self.into_iter().map(Restate::restate).collect()
    }
}

impl<T: Restate<U>, U: Ord> Restate<BTreeSet<U>> for BTreeSet<T> {
    fn restate(self) -> BTreeSet<U> {
        self.into_iter().map(Restate::restate).collect()
    }
}

impl<K: Restate<L>, L: Ord, V: Restate<W>, W> Restate<BTreeMap<L, W>> for BTreeMap<K, V> {
    fn restate(self) -> BTreeMap<L, W> {
        self.into_iter().map(|(key, value)| (key.restate(), value.restate())).collect()
    }
}

impl<T: Restate<U>, U> Restate<Option<U>> for Option<T> {
    fn restate(self) -> Option<U> {
        self.map(Restate::restate)
    }
}

impl<T: Restate<U>, U, E: Restate<F>, F> Restate<Result<U, F>> for Result<T, E> {
    fn restate(self) -> Result<U, F> {
        self.map(Restate::restate).map_err(Restate::restate)
    }
}

impl<A: Restate<B>, B, C: Restate<D>, D> Restate<(B, D)> for (A, C) {
    fn restate(self) -> (B, D) {
        (self.0.restate(), self.1.restate())
    }
}

impl<A: Restate<B>, B, C: Restate<D>, D, E: Restate<F>, F> Restate<(B, D, F)> for (A, C, E) {
    fn restate(self) -> (B, D, F) {
        (self.0.restate(), self.1.restate(), self.2.restate())
    }
}
