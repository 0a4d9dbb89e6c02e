//! `LinkConfig` as each format stores it: format 11's had no tenant and no ACL copying (format
//! 12). The layouts live here rather than beside `LinkConfig`, so the in-memory type says only
//! what a link is.

use serde::{Deserialize, Serialize};

use super::{LinkConfig, LinkSasl};

impl Serialize for LinkConfig {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        /// Format 11's link config, written for a snapshot an older voter installs.
        #[derive(Serialize)]
        struct LinkConfigV11<'a> {
            bootstrap: &'a str,
            tls: bool,
            tls_ca_pem: &'a Option<String>,
            sasl: &'a Option<LinkSasl>,
            topics: &'a str,
            groups: &'a Option<String>,
            sync_configs: bool,
        }
        #[derive(Serialize)]
        struct LinkConfigV12<'a> {
            bootstrap: &'a str,
            tls: bool,
            tls_ca_pem: &'a Option<String>,
            sasl: &'a Option<LinkSasl>,
            topics: &'a str,
            groups: &'a Option<String>,
            sync_configs: bool,
            tenant: &'a Option<String>,
            acls: bool,
        }
        let Self { bootstrap, tls, tls_ca_pem, sasl, topics, groups, sync_configs, tenant, acls } = self;
        let (tls, sync_configs, acls) = (*tls, *sync_configs, *acls);
        if (1..=11).contains(&super::encoding_format()) {
            if tenant.is_some() || acls {
                return Err(serde::ser::Error::custom("a link's tenant or ACL copying needs format 12"));
            }
            return LinkConfigV11 { bootstrap, tls, tls_ca_pem, sasl, topics, groups, sync_configs }.serialize(s);
        }
        LinkConfigV12 { bootstrap, tls, tls_ca_pem, sasl, topics, groups, sync_configs, tenant, acls }.serialize(s)
    }
}

impl<'de> Deserialize<'de> for LinkConfig {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        /// Format 11's link config: no tenant, no ACL copying.
        #[derive(Deserialize)]
        struct LinkConfigV11 {
            bootstrap: String,
            tls: bool,
            tls_ca_pem: Option<String>,
            sasl: Option<LinkSasl>,
            topics: String,
            groups: Option<String>,
            sync_configs: bool,
        }
        #[derive(Deserialize)]
        struct LinkConfigV12 {
            bootstrap: String,
            tls: bool,
            tls_ca_pem: Option<String>,
            sasl: Option<LinkSasl>,
            topics: String,
            groups: Option<String>,
            sync_configs: bool,
            tenant: Option<String>,
            acls: bool,
        }
        if (1..=11).contains(&super::decoding_format()) {
            let LinkConfigV11 { bootstrap, tls, tls_ca_pem, sasl, topics, groups, sync_configs } =
                LinkConfigV11::deserialize(d)?;
            return Ok(Self {
                bootstrap,
                tls,
                tls_ca_pem,
                sasl,
                topics,
                groups,
                sync_configs,
                tenant: None,
                acls: false,
            });
        }
        let LinkConfigV12 { bootstrap, tls, tls_ca_pem, sasl, topics, groups, sync_configs, tenant, acls } =
            LinkConfigV12::deserialize(d)?;
        Ok(Self { bootstrap, tls, tls_ca_pem, sasl, topics, groups, sync_configs, tenant, acls })
    }
}
