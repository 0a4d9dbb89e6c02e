pub(crate) mod admin;
pub(crate) mod agent;
mod archive;
pub(crate) mod companion;
pub(crate) mod dev;
pub(crate) mod doctor;
mod listen;
pub(crate) mod metadata;
mod serve_agent;
mod tenants;

/// Turns on mutual TLS for this process's metadata connections when the flags name the files.
/// Returns whether it did.
pub(crate) fn install_metadata_tls(args: &crate::cli::MetadataTlsArgs) -> anyhow::Result<bool> {
    let (Some(cert), Some(key), Some(ca)) = (&args.metadata_tls_cert, &args.metadata_tls_key, &args.metadata_tls_ca)
    else {
        return Ok(false);
    };
    let files = floe_metadata::tls::TlsFiles { cert: cert.clone(), key: key.clone(), ca: ca.clone() };
    let tls = floe_metadata::tls::MetadataTls::load(&files)?;
    tracing::info!(role = ?tls.role(), "metadata connections use mutual TLS");
    floe_metadata::tls::install(tls)?;
    Ok(true)
}

/// The operator token in `path` (`--operator-token-file`), trimmed.
pub(crate) fn read_operator_token(path: &std::path::Path) -> anyhow::Result<String> {
    use anyhow::Context;
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading the operator token from {}", path.display()))?;
    Ok(text.trim().to_owned())
}
