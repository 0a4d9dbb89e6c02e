//! Tenants as virtual clusters: a tenant's topics, consumer groups and transactional ids are
//! stored as `KEY~NAME`, where KEY is the tenant's namespace key: `TENANT#ID` with the tenant's
//! id, which is never reused, so a tenant created again under a deleted one's name never sees
//! anything the old one left (a producer id, a late commit). Tenants created before format 2
//! have id 0 and the key `TENANT`, as names were stored then. Neither tenant names nor Kafka
//! topic names may contain `~` or `#`, so a stored name splits one way only, and a client of one
//! tenant can never name another's. Principals without a tenant (a cluster without
//! authentication) see stored names as they are.

/// Between a tenant's namespace key and a name of its namespace.
pub const SEPARATOR: char = '~';
/// Between a tenant's name and its id in a namespace key.
const ID_SEPARATOR: char = '#';

/// The namespace key of tenant `name` with id `id`.
pub fn namespace_key(name: &str, id: u64) -> String {
    if id == 0 { name.to_owned() } else { format!("{name}{ID_SEPARATOR}{id}") }
}

/// The tenant name and id a namespace key names, if it is one (`TENANT` or `TENANT#ID`, ID > 0).
pub fn parse_key(key: &str) -> Option<(&str, u64)> {
    match key.split_once(ID_SEPARATOR) {
        None => Some((key, 0)),
        Some((name, id)) => {
            let digits = !id.is_empty() && !id.starts_with('0') && id.bytes().all(|b| b.is_ascii_digit());
            id.parse().ok().filter(|_| digits).map(|id| (name, id))
        }
    }
}

/// One tenant's namespace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Namespace {
    /// `KEY~`.
    prefix: String,
}

impl Namespace {
    /// The namespace with key `key` (see [`namespace_key`]).
    pub fn of(key: &str) -> Self {
        Self { prefix: format!("{key}{SEPARATOR}") }
    }

    /// `KEY~`: every stored name of this namespace starts with it.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The namespace key: what producer ids are bound to.
    pub fn key(&self) -> &str {
        &self.prefix[..self.prefix.len() - SEPARATOR.len_utf8()]
    }

    /// The stored name of `name`. An empty name stays empty, so it is refused as Kafka refuses
    /// it (an empty group id, transactional id or topic name).
    pub fn scope(&self, name: &str) -> String {
        if name.is_empty() { String::new() } else { format!("{}{name}", self.prefix) }
    }

    /// The name a client of this namespace knows `stored` by, if `stored` is in it.
    pub fn unscope<'a>(&self, stored: &'a str) -> Option<&'a str> {
        stored.strip_prefix(self.prefix.as_str())
    }

    pub fn owns(&self, stored: &str) -> bool {
        stored.starts_with(self.prefix.as_str())
    }

    /// Bytes a name loses to the prefix, for limits stated to clients.
    pub fn prefix_len(&self) -> usize {
        self.prefix.len()
    }
}

/// The namespace key of the tenant a stored topic name belongs to, if any. Only for topic
/// names: Kafka topic names cannot contain the separator, while a cluster without tenants may
/// have group and transactional ids that do.
pub fn key_of(stored_topic: &str) -> Option<&str> {
    stored_topic.split_once(SEPARATOR).map(|(tenant, _)| tenant)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_stay_inside_their_namespace() {
        let acme = Namespace::of("acme");
        let stored = acme.scope("orders");
        assert_eq!(stored, "acme~orders");
        assert_eq!(acme.unscope(&stored), Some("orders"));
        assert!(acme.owns(&stored));
        assert!(!Namespace::of("acm").owns(&stored), "a tenant whose name is a prefix of another's");
        assert!(!Namespace::of("acme").owns("acmeorders"));
        assert_eq!(acme.scope(""), "", "empty names stay empty, to be refused");
        // A group id may itself contain the separator: it splits at the first one.
        assert_eq!(acme.unscope(&acme.scope("a~b")), Some("a~b"));
    }

    #[test]
    fn keys_name_one_incarnation_of_a_tenant() {
        assert_eq!(namespace_key("acme", 0), "acme", "tenants from before format 2");
        assert_eq!(namespace_key("acme", 7), "acme#7");
        assert_eq!(parse_key("acme#7"), Some(("acme", 7)));
        assert_eq!(parse_key("acme"), Some(("acme", 0)));
        for bad in ["acme#", "acme#07", "acme#0", "acme#x", "acme#-1"] {
            assert_eq!(parse_key(bad), None, "{bad}");
        }
        let (old, new) = (Namespace::of(&namespace_key("acme", 3)), Namespace::of(&namespace_key("acme", 9)));
        assert_eq!(new.key(), "acme#9");
        assert!(!new.owns(&old.scope("orders")) && !old.owns(&new.scope("orders")));
        assert!(!Namespace::of("acme").owns(&new.scope("orders")), "the old key is not a prefix of the new");
        assert_eq!(key_of(&new.scope("orders")), Some("acme#9"));
    }
}
