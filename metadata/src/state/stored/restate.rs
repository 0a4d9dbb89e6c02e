//! Conversions between the stored layouts and the in-memory types. [`Restate`] converts a field
//! of either into the other, through containers; [`stored_layout!`] writes both conversions of
//! a struct from its field names, so a field added to either side does not compile until it is
//! named there.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use serde::{Serialize, Serializer};

/// A value as the other side holds it: a stored layout as its in-memory type or back. Values
/// with one form for both (numbers, strings, vocabulary enums, messages kept as sent) are
/// themselves.
pub(crate) trait Restate<T> {
    fn restate(self) -> T;
}

/// `From` both ways between a stored struct and its in-memory type, naming every field,
/// [`Restate`] between them and [`WriteStored`] for the in-memory type: by converting a copy
/// whole, or `by field:` for the large ones (the state, topics, partitions).
macro_rules! stored_layout {
    (@from $stored:ident <=> $($memory:ident)::+ { $($field:ident),+ }) => {
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
    };
    ($stored:ident <=> $($memory:ident)::+ { $($field:ident),+ $(,)? }) => {
        $crate::state::stored::stored_layout!(@from $stored <=> $($memory)::+ { $($field),+ });
        $crate::state::stored::restate_via_from!($stored <=> $($memory)::+);
    };
    // A large type, written field by field rather than converted whole.
    (by field: $stored:ident <=> $($memory:ident)::+ { $($field:ident),+ $(,)? }) => {
        $crate::state::stored::stored_layout!(@from $stored <=> $($memory)::+ { $($field),+ });
        $crate::state::stored::restate_both_ways!($stored <=> $($memory)::+);
        $crate::state::stored::write_stored_by_field!($stored <=> $($memory)::+ { $($field),+ });
    };
    // With fields held in memory only, rebuilt from the stored ones by `$rebuild` after a load.
    (by field: $stored:ident <=> $($memory:ident)::+ { $($field:ident),+ $(,)? } derived { $($derived:ident),+ $(,)? } by $rebuild:path) => {
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

        $crate::state::stored::restate_both_ways!($stored <=> $($memory)::+);
        $crate::state::stored::write_stored_by_field!($stored <=> $($memory)::+ { $($field),+ } skip { $($derived),+ });
    };
}

/// [`Restate`] both ways between two types that convert with `From`, and [`WriteStored`] for
/// the in-memory one by converting a copy of it whole (one record: small).
macro_rules! restate_via_from {
    ($stored:ident <=> $($memory:ident)::+) => {
        $crate::state::stored::restate_both_ways!($stored <=> $($memory)::+);

        impl $crate::state::stored::WriteStored for $($memory)::+ {
            fn write_stored<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serde::Serialize::serialize(&$stored::from(self.clone()), serializer)
            }
        }
    };
}

/// [`Restate`] both ways between two types that convert with `From`.
macro_rules! restate_both_ways {
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

/// [`WriteStored`] for a large in-memory type, field by field in the stored layout's order (the
/// order the fields are named in, which must be the stored struct's: the golden files and
/// `state::tests` compare the bytes with those of the converted layout). Fields after `skip`
/// are in memory only.
macro_rules! write_stored_by_field {
    ($stored:ident <=> $($memory:ident)::+ { $($field:ident),+ $(,)? } $(skip { $($derived:ident),+ })?) => {
        impl $crate::state::stored::WriteStored for $($memory)::+ {
            fn write_stored<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                use serde::ser::SerializeStruct;
                let $($memory)::+ { $($field),+ $($(, $derived: _)+)? } = self;
                let mut out = serializer.serialize_struct(stringify!($stored), [$(stringify!($field)),+].len())?;
                $(out.serialize_field(stringify!($field), &$crate::state::stored::AsStored($field))?;)+
                out.end()
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
        }

        impl WriteStored for $ty {
            fn write_stored<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                self.serialize(serializer)
            }
        })+
    };
}

pub(crate) use {restate_both_ways, restate_via_from, stored_layout, write_stored_by_field};

/// A value written in its stored layout a piece at a time, never that layout whole: a snapshot,
/// an archive or a state copy would otherwise hold a second, converted copy of a large state
/// while encoding it. Records are converted one at a time (small); the containers, the state,
/// its topics and their partitions are written element by element, to the same bytes.
pub(crate) trait WriteStored {
    fn write_stored<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error>;
}

/// A value serialized as its stored layout serializes ([`WriteStored`]).
pub(crate) struct AsStored<'a, T: ?Sized>(pub(crate) &'a T);

impl<T: WriteStored + ?Sized> Serialize for AsStored<'_, T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.write_stored(serializer)
    }
}

impl<T: WriteStored> WriteStored for Vec<T> {
    fn write_stored<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.iter().map(AsStored))
    }
}

impl<T: WriteStored> WriteStored for VecDeque<T> {
    fn write_stored<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.iter().map(AsStored))
    }
}

impl<T: WriteStored> WriteStored for BTreeSet<T> {
    fn write_stored<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.iter().map(AsStored))
    }
}

impl<K: WriteStored, V: WriteStored> WriteStored for BTreeMap<K, V> {
    fn write_stored<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.iter().map(|(key, value)| (AsStored(key), AsStored(value))))
    }
}

impl<T: WriteStored> WriteStored for Option<T> {
    fn write_stored<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Some(value) => serializer.serialize_some(&AsStored(value)),
            None => serializer.serialize_none(),
        }
    }
}

impl<T: WriteStored, E: WriteStored> WriteStored for Result<T, E> {
    fn write_stored<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Ok(value) => serializer.serialize_newtype_variant("Result", 0, "Ok", &AsStored(value)),
            Err(error) => serializer.serialize_newtype_variant("Result", 1, "Err", &AsStored(error)),
        }
    }
}

impl<T: WriteStored> WriteStored for std::sync::Arc<T> {
    fn write_stored<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        (**self).write_stored(serializer)
    }
}

impl<A: WriteStored, B: WriteStored> WriteStored for (A, B) {
    fn write_stored<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeTuple;
        let mut out = serializer.serialize_tuple(2)?;
        out.serialize_element(&AsStored(&self.0))?;
        out.serialize_element(&AsStored(&self.1))?;
        out.end()
    }
}

impl<A: WriteStored, B: WriteStored, C: WriteStored> WriteStored for (A, B, C) {
    fn write_stored<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeTuple;
        let mut out = serializer.serialize_tuple(3)?;
        out.serialize_element(&AsStored(&self.0))?;
        out.serialize_element(&AsStored(&self.1))?;
        out.serialize_element(&AsStored(&self.2))?;
        out.end()
    }
}

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
