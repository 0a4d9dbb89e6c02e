//! `floe doctor`: checks an S3 bucket (and, with `--metadata`, the metadata cluster) before Floe
//! trusts it, with the AWS SDK: credentials and region, the object operations Floe uses on its
//! prefix, conditional create, the bucket's lifecycle, versioning, Object Lock and encryption
//! settings, request latency, and the request cost of a GiB. Every check passes, warns or fails
//! with the fix; any failure makes the exit status non-zero.

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use aws_sdk_s3::config::ProvideCredentials;
use aws_sdk_s3::error::ProvideErrorMetadata;
use aws_sdk_s3::primitives::ByteStream;
use serde::Serialize;

use crate::cli::DoctorArgs;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
enum Status {
    Pass,
    Warn,
    Fail,
}

#[derive(Debug, Serialize)]
struct Check {
    check: &'static str,
    status: Status,
    detail: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    fix: Option<String>,
}

#[derive(Default)]
struct Report(Vec<Check>);

impl Report {
    fn add(&mut self, check: &'static str, status: Status, detail: impl Into<String>, fix: Option<String>) {
        self.0.push(Check { check, status, detail: detail.into(), fix });
    }
    fn pass(&mut self, check: &'static str, detail: impl Into<String>) {
        self.add(check, Status::Pass, detail, None);
    }
    fn warn(&mut self, check: &'static str, detail: impl Into<String>, fix: impl Into<String>) {
        self.add(check, Status::Warn, detail, Some(fix.into()));
    }
    fn fail(&mut self, check: &'static str, detail: impl Into<String>, fix: impl Into<String>) {
        self.add(check, Status::Fail, detail, Some(fix.into()));
    }
}

/// The HTTP status and error code of a failed S3 call.
fn error_of<E>(e: &aws_sdk_s3::error::SdkError<E, aws_sdk_s3::config::http::HttpResponse>) -> (Option<u16>, String)
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
{
    let status = e.raw_response().map(|r| r.status().as_u16());
    // Without an S3 error code (an answer the SDK could not parse), the start of the message.
    let code = e.code().map(str::to_owned).unwrap_or_else(|| {
        let text = aws_sdk_s3::error::DisplayErrorContext(e).to_string();
        let cut = text.char_indices().nth(160).map_or(text.len(), |(i, _)| i);
        format!("{}{}", &text[..cut], if cut < text.len() { "…" } else { "" })
    });
    (status, code)
}

/// `s3://bucket/prefix` → (bucket, prefix without slashes at either end).
fn parse_url(url: &str) -> anyhow::Result<(String, String)> {
    let Some(rest) = url.strip_prefix("s3://") else {
        bail!("floe doctor checks S3 buckets (s3://bucket/prefix); {url} needs no check")
    };
    let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
    if bucket.is_empty() {
        bail!("{url}: no bucket name");
    }
    Ok((bucket.to_owned(), prefix.trim_matches('/').to_owned()))
}

/// Where the default credential chain finds credentials, judged by what it looks at first.
fn credential_source() -> &'static str {
    let set = |name: &str| std::env::var_os(name).is_some_and(|v| !v.is_empty());
    if set("AWS_ACCESS_KEY_ID") {
        "environment variables"
    } else if set("AWS_WEB_IDENTITY_TOKEN_FILE") {
        "a web identity token (EKS service account or similar)"
    } else if set("AWS_PROFILE") {
        "a named profile"
    } else if set("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI") || set("AWS_CONTAINER_CREDENTIALS_FULL_URI") {
        "the container credentials endpoint (ECS)"
    } else {
        "the default profile or the instance's role (instance metadata)"
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let index = ((sorted.len() as f64 * p).ceil() as usize).saturating_sub(1).min(sorted.len().saturating_sub(1));
    sorted.get(index).copied().unwrap_or_default()
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

pub(crate) async fn run(args: DoctorArgs) -> anyhow::Result<()> {
    let (bucket, prefix) = parse_url(&args.object_store)?;
    let mut report = Report::default();

    let mut loader = aws_config::defaults(aws_config::BehaviorVersion::latest());
    if let Some(endpoint) = &args.s3_endpoint {
        loader = loader.endpoint_url(endpoint);
    }
    let config = loader.load().await;
    match config.region() {
        Some(region) => {
            let from = if std::env::var_os("AWS_REGION").is_some() || std::env::var_os("AWS_DEFAULT_REGION").is_some() {
                "the environment"
            } else {
                "the profile or instance metadata"
            };
            report.pass("region", format!("{region}, from {from}"));
        }
        None => report.fail("region", "no region found", "set AWS_REGION (or region in the profile)"),
    }
    let credentials = match config.credentials_provider() {
        Some(provider) => provider.provide_credentials().await.map_err(|e| e.to_string()),
        None => Err("no credential provider".to_owned()),
    };
    match credentials {
        Ok(_) => report.pass("credentials", format!("found, from {}", credential_source())),
        Err(e) => report.fail(
            "credentials",
            format!("none found: {e}"),
            "give the host an instance role, or set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY",
        ),
    }
    let s3_config = aws_sdk_s3::config::Builder::from(&config)
        // S3-compatible servers are addressed by path; AWS by virtual host.
        .force_path_style(args.s3_endpoint.is_some())
        .build();
    let s3 = aws_sdk_s3::Client::from_conf(s3_config);
    let base = if prefix.is_empty() { ".floe-doctor".to_owned() } else { format!("{prefix}/.floe-doctor") };
    let key = format!("{base}/{}", uuid::Uuid::new_v4().simple());
    let arn = if prefix.is_empty() {
        format!("arn:aws:s3:::{bucket}/*")
    } else {
        format!("arn:aws:s3:::{bucket}/{prefix}/*")
    };

    object_operations(&s3, &bucket, &base, &key, &arn, &mut report).await;
    conditional_create(&s3, &bucket, &base, &mut report).await;
    bucket_settings(&s3, &bucket, &mut report).await;
    latency_and_cost(&s3, &bucket, &base, &args, &mut report).await;
    if let Some(addrs) = &args.metadata {
        metadata_cluster(addrs, &mut report).await;
    }

    let failed = report.0.iter().any(|c| c.status == Status::Fail);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&serde_json::json!({ "ok": !failed, "checks": report.0 }))?);
    } else {
        for check in &report.0 {
            let status = match check.status {
                Status::Pass => "pass",
                Status::Warn => "WARN",
                Status::Fail => "FAIL",
            };
            println!("{status:<5} {:<22} {}", check.check, check.detail);
            if let Some(fix) = &check.fix {
                println!("      {:<22} fix: {fix}", "");
            }
        }
    }
    if failed {
        std::process::exit(1);
    }
    Ok(())
}

async fn object_operations(
    s3: &aws_sdk_s3::Client,
    bucket: &str,
    base: &str,
    key: &str,
    arn: &str,
    report: &mut Report,
) {
    let body = ByteStream::from(b"floe doctor".to_vec());
    match s3.put_object().bucket(bucket).key(key).body(body).send().await {
        Ok(_) => report.pass("put", format!("wrote s3://{bucket}/{key}")),
        Err(e) => {
            let (_, code) = error_of(&e);
            report.fail("put", format!("PutObject refused: {code}"), format!("allow s3:PutObject on {arn}"));
        }
    }
    match s3.get_object().bucket(bucket).key(key).send().await {
        Ok(out) => match out.body.collect().await.map(|b| b.into_bytes()) {
            Ok(bytes) if bytes.as_ref() == b"floe doctor" => report.pass("get", "read back what was written"),
            Ok(_) => report.fail("get", "read back other bytes than were written", "check the endpoint and any proxy"),
            Err(e) => report.fail("get", format!("reading the body: {e}"), "check the network path to the store"),
        },
        Err(e) => {
            let (_, code) = error_of(&e);
            report.fail("get", format!("GetObject refused: {code}"), format!("allow s3:GetObject on {arn}"));
        }
    }
    match s3.list_objects_v2().bucket(bucket).prefix(format!("{base}/")).send().await {
        Ok(out) if out.contents().iter().any(|o| o.key() == Some(key)) => {
            report.pass("list", "the prefix lists what was written")
        }
        Ok(_) => report.fail(
            "list",
            "the prefix does not list what was written",
            "Floe finds orphans by listing: the store must list new objects",
        ),
        Err(e) => {
            let (_, code) = error_of(&e);
            report.fail(
                "list",
                format!("ListObjectsV2 refused: {code}"),
                format!("allow s3:ListBucket on arn:aws:s3:::{bucket} for the prefix"),
            );
        }
    }
    match s3.delete_object().bucket(bucket).key(key).send().await {
        Ok(_) => report.pass("delete", "deleted the test object"),
        Err(e) => {
            let (_, code) = error_of(&e);
            report.fail(
                "delete",
                format!("DeleteObject refused: {code}"),
                format!("allow s3:DeleteObject on {arn}: garbage collection, retention and compaction delete objects"),
            );
        }
    }
}

/// Floe writes every object with `If-None-Match: *` and relies on a second writer of the same
/// key being refused with 412.
async fn conditional_create(s3: &aws_sdk_s3::Client, bucket: &str, base: &str, report: &mut Report) {
    let key = format!("{base}/{}-conditional", uuid::Uuid::new_v4().simple());
    let put = |body: &'static [u8]| {
        s3.put_object().bucket(bucket).key(&key).if_none_match("*").body(ByteStream::from(body.to_vec())).send()
    };
    let fix = "use a store that honours conditional writes (S3 does since 2024; MinIO, Ceph RGW and recent moto do)";
    match put(b"first").await {
        Err(e) => {
            let (status, code) = error_of(&e);
            report.fail(
                "conditional create",
                format!("a first create with If-None-Match was refused: {code} ({status:?})"),
                fix,
            );
        }
        Ok(_) => match put(b"second").await {
            Err(e) if error_of(&e).0 == Some(412) || error_of(&e).1 == "PreconditionFailed" => {
                report.pass("conditional create", "a second create of the same key is refused (412)")
            }
            Err(e) => {
                let (status, code) = error_of(&e);
                report.fail(
                    "conditional create",
                    format!("a second create failed with {code} ({status:?}), not 412"),
                    fix,
                );
            }
            Ok(_) => report.fail(
                "conditional create",
                "a second create of the same key succeeded: the store ignores If-None-Match, so two agents could \
                 overwrite each other's objects",
                fix,
            ),
        },
    }
    let _ = s3.delete_object().bucket(bucket).key(&key).send().await;
}

async fn bucket_settings(s3: &aws_sdk_s3::Client, bucket: &str, report: &mut Report) {
    let lifecycle_fix = "add a lifecycle rule with AbortIncompleteMultipartUpload (DaysAfterInitiation 1): \
                         uploads cut short by a crash otherwise cost storage forever";
    match s3.get_bucket_lifecycle_configuration().bucket(bucket).send().await {
        Ok(out) if out.rules().iter().any(|r| r.abort_incomplete_multipart_upload().is_some()) => {
            report.pass("multipart lifecycle", "a rule aborts incomplete multipart uploads")
        }
        Ok(_) => report.warn("multipart lifecycle", "no rule aborts incomplete multipart uploads", lifecycle_fix),
        Err(e) => {
            let (_, code) = error_of(&e);
            if code == "NoSuchLifecycleConfiguration" {
                report.warn("multipart lifecycle", "the bucket has no lifecycle rules", lifecycle_fix);
            } else {
                report.warn("multipart lifecycle", format!("cannot read the lifecycle rules: {code}"), lifecycle_fix);
            }
        }
    }
    // Some S3-compatible servers answer with another XML root than S3's, which the SDK refuses:
    // their status is then read from the answer's body.
    let versioning = match s3.get_bucket_versioning().bucket(bucket).send().await {
        Ok(out) => Ok(out.status().map(|s| s.as_str().to_owned())),
        Err(e) => match e.raw_response().filter(|r| r.status().as_u16() == 200).and_then(|r| r.body().bytes()) {
            Some(body) => {
                let body = String::from_utf8_lossy(body);
                Ok(["Enabled", "Suspended"]
                    .into_iter()
                    .find(|s| body.contains(&format!("<Status>{s}</Status>")))
                    .map(str::to_owned))
            }
            None => Err(error_of(&e).1),
        },
    };
    match versioning {
        Ok(Some(status)) if status == "Enabled" => report.warn(
            "versioning",
            "enabled: objects Floe deletes stay as noncurrent versions and keep costing",
            "add a lifecycle rule expiring noncurrent versions (NoncurrentVersionExpiration), or suspend versioning",
        ),
        Ok(Some(status)) => report.pass("versioning", status),
        Ok(None) => report.pass("versioning", "never enabled"),
        Err(code) => report.warn("versioning", format!("cannot read: {code}"), "allow s3:GetBucketVersioning"),
    }
    match s3.get_object_lock_configuration().bucket(bucket).send().await {
        Ok(out) if out.object_lock_configuration().is_some_and(|c| c.rule().is_some()) => report.warn(
            "object lock",
            "a default retention rule is set: Floe's deletes (retention, compaction, garbage) will be refused",
            "use a bucket without default Object Lock retention for Floe",
        ),
        Ok(_) => report.pass("object lock", "no default retention"),
        Err(e) => {
            let (_, code) = error_of(&e);
            if code == "ObjectLockConfigurationNotFoundError" {
                report.pass("object lock", "not configured");
            } else {
                report.warn("object lock", format!("cannot read: {code}"), "allow s3:GetBucketObjectLockConfiguration");
            }
        }
    }
    match s3.get_bucket_encryption().bucket(bucket).send().await {
        Ok(out) => {
            let algorithms: Vec<String> = out
                .server_side_encryption_configuration()
                .map(|c| c.rules())
                .unwrap_or_default()
                .iter()
                .filter_map(|r| r.apply_server_side_encryption_by_default())
                .map(|d| d.sse_algorithm().as_str().to_owned())
                .collect();
            if algorithms.is_empty() {
                report.warn("encryption", "no default encryption rule", "set default encryption (SSE-S3 or SSE-KMS)");
            } else {
                report.pass("encryption", format!("default {}", algorithms.join(", ")));
            }
        }
        Err(e) => report.warn(
            "encryption",
            format!("no default encryption found: {}", error_of(&e).1),
            "set default encryption (SSE-S3 or SSE-KMS) on the bucket",
        ),
    }
}

/// Median and p99 of PUTs and GETs of `size` bytes, `samples` of each.
async fn measure(
    s3: &aws_sdk_s3::Client,
    bucket: &str,
    base: &str,
    size: usize,
    samples: usize,
) -> anyhow::Result<(Vec<Duration>, Vec<Duration>)> {
    let body = vec![0x5au8; size];
    let (mut puts, mut gets) = (Vec::new(), Vec::new());
    for _ in 0..samples {
        let key = format!("{base}/{}-latency", uuid::Uuid::new_v4().simple());
        let started = Instant::now();
        s3.put_object().bucket(bucket).key(&key).body(ByteStream::from(body.clone())).send().await.context("PUT")?;
        puts.push(started.elapsed());
        let started = Instant::now();
        let out = s3.get_object().bucket(bucket).key(&key).send().await.context("GET")?;
        out.body.collect().await.context("GET body")?;
        gets.push(started.elapsed());
        let _ = s3.delete_object().bucket(bucket).key(&key).send().await;
    }
    puts.sort();
    gets.sort();
    Ok((puts, gets))
}

async fn latency_and_cost(s3: &aws_sdk_s3::Client, bucket: &str, base: &str, args: &DoctorArgs, report: &mut Report) {
    for (label, size, samples) in
        [("latency 4 KiB", 4096, args.samples), ("latency 8 MiB", 8 << 20, args.samples.div_ceil(2))]
    {
        match measure(s3, bucket, base, size, samples.max(1)).await {
            Ok((puts, gets)) => {
                let detail = format!(
                    "PUT p50 {} p99 {}, GET p50 {} p99 {} ({} samples)",
                    ms(percentile(&puts, 0.5)),
                    ms(percentile(&puts, 0.99)),
                    ms(percentile(&gets, 0.5)),
                    ms(percentile(&gets, 0.99)),
                    puts.len()
                );
                // Producers wait for a flush's PUT: past a second, acknowledgements crawl.
                if percentile(&puts, 0.99) > Duration::from_secs(1) {
                    report.warn(label, detail, "run agents in the bucket's region, or check the network path");
                } else {
                    report.pass(label, detail);
                }
            }
            Err(e) => report.fail(label, format!("{e:#}"), "see the put and get checks"),
        }
    }
    let gib = 1u64 << 30;
    let puts = gib.div_ceil(args.flush_bytes.max(1));
    // Reads GET whole 4 MiB blocks (the block cache's size).
    let gets = gib.div_ceil(4 << 20);
    let dollars = |requests: u64, per_thousand: f64| requests as f64 / 1000.0 * per_thousand;
    report.pass(
        "request cost per GiB",
        format!(
            "{puts} PUTs at {} MiB flushes (${:.5}), {gets} GETs to read it cold (${:.5}), at ${}/1000 PUT and \
             ${}/1000 GET",
            args.flush_bytes >> 20,
            dollars(puts, args.put_price),
            dollars(gets, args.get_price),
            args.put_price,
            args.get_price
        ),
    );
}

async fn metadata_cluster(addrs: &[String], report: &mut Report) {
    let mut statuses = Vec::new();
    let mut skew_max = 0i64;
    for addr in addrs {
        match floe_metadata::raft::network::fetch_status(addr).await {
            Ok(status) => statuses.push(status),
            Err(e) => {
                report.fail(
                    "metadata node",
                    format!("{addr}: {e}"),
                    "start the node, or check the address and port 9093",
                );
                continue;
            }
        }
        if let Ok((node_ms, rtt)) = floe_metadata::raft::network::fetch_clock(addr).await {
            let here = floe_metadata::now_ms() - i64::try_from(rtt.as_millis() / 2).unwrap_or(0);
            skew_max = skew_max.max((node_ms - here).abs());
        }
    }
    let Some(first) = statuses.first() else { return };
    let voters = first.voters.len();
    let leaders: std::collections::BTreeSet<_> = statuses.iter().filter_map(|s| s.leader).collect();
    match (leaders.len(), first.leader) {
        (1, Some(leader)) if statuses.len() * 2 > voters || statuses.len() == addrs.len() => report.pass(
            "metadata quorum",
            format!("leader node {leader}, term {}, {} of {voters} voters answered", first.term, statuses.len()),
        ),
        (0, _) => report.fail(
            "metadata quorum",
            "no leader",
            "a majority of the voters must run and reach each other on the metadata port",
        ),
        _ => report.warn(
            "metadata quorum",
            format!("nodes name different leaders {leaders:?}"),
            "an election is under way; run again",
        ),
    }
    let clock_fix = "run chrony (or systemd-timesyncd) against the same time source on every host";
    let skew_detail = format!("metadata nodes within {skew_max} ms of this host");
    if skew_max > 1000 {
        report.warn("metadata clocks", skew_detail, clock_fix);
    } else {
        report.pass("metadata clocks", skew_detail);
    }
    // Agents heartbeat every 2 s with their own clock: a heartbeat far from now is a skewed clock
    // (or a dead agent, which drops out after 10 s).
    // Agents silent for over a minute have left and are not judged.
    let now = floe_metadata::now_ms();
    let agents: Vec<_> = (statuses.iter().max_by_key(|s| s.applied_index).map(|s| s.agents.clone()))
        .unwrap_or_default()
        .into_iter()
        .filter(|a| now - a.last_heartbeat_ms < 60_000)
        .collect();
    let worst = agents.iter().map(|a| (a.info.agent_id, now - a.last_heartbeat_ms)).max_by_key(|(_, d)| d.abs());
    match worst {
        None => report.warn("agent clocks", "no agent has heartbeated", "start the agents"),
        Some((id, delta)) if delta.abs() > 5_000 => report.warn(
            "agent clocks",
            format!("agent {id}'s last heartbeat is {delta} ms from this host's clock ({} agents)", agents.len()),
            clock_fix,
        ),
        Some(_) => report.pass("agent clocks", format!("{} agents' heartbeats within 5 s of this host", agents.len())),
    }
}
