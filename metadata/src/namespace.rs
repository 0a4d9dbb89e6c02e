//! Tenants as virtual clusters: a tenant's topics, consumer groups and transactional ids are
//! stored as `TENANT~NAME`. Neither tenant names nor Kafka topic names may contain `~`, so a
//! stored name splits one way only, and a client of one tenant can never name another's.
//! Principals without a tenant (a cluster without authentication) see stored names as they are.

/// Between a tenant's name and a name of its namespace.
pub const SEPARATOR: char = '~';

/// One tenant's namespace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Namespace {
    /// `TENANT~`.
    prefix: String,
}

impl Namespace {
    pub fn of(tenant: &str) -> Self {
        Self { prefix: format!("{tenant}{SEPARATOR}") }
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

/// The tenant a stored topic name belongs to, if any. Only for topic names: Kafka topic names
/// cannot contain the separator, while a cluster without tenants may have group and
/// transactional ids that do.
pub fn tenant_of(stored_topic: &str) -> Option<&str> {
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
}
