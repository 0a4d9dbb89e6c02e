"""Structural checks of terraform/ that need no provider download.

Every .tf file is parsed with python-hcl2 and the security and operability
properties the BYOC module promises (issue 9) are asserted on the parsed
blocks: documented, typed and validated variables; a private, encrypted
bucket that aborts stale multipart uploads; an IAM policy scoped to the
bucket and prefix; no ingress from anywhere; the metadata port reachable
only from the cluster's own security groups; cross-zone load balancing off;
IMDSv2 and encrypted EBS everywhere; tags on every taggable resource. And
(issue 23) encrypted and authenticated by default: a plan with neither TLS
variable fails unless allow_unauthenticated; SASL and API keys on unless it
is set; TLS on the load balancer (ACM) or on the agents (Secrets Manager);
the secrets readable by their own ARNs only. And mutual TLS on the metadata
port by default: a CA and a certificate per identity from the tls provider,
each in its own Secrets Manager secret, readable by the instances of that
identity only (agents and metadata nodes have a role each; the operator's
certificate is readable by neither), and the TLS flags in the rendered units
unless metadata_mtls = false, which turns on the plaintext flag instead.

When a `terraform` binary exists, the cloud-init templates are also rendered
with Terraform's own template engine (a throwaway root module with no
providers) and the rendered YAML and shell scripts are checked: the agent's
start command in each security mode, and the prepare scripts (the agent's
whole, the metadata node's secrets) run against stubbed instance metadata and
Secrets Manager. With the aws provider installed locally as well, the module
is validated with `terraform validate`, the tls provider's resources (which
cannot be downloaded here) replaced by locals of the same shape.

Run through scripts/test-terraform.sh, which provides python-hcl2 and pytest.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import stat
import subprocess
from pathlib import Path

import hcl2
import pytest
from hcl2.utils import SerializationOptions

ROOT = Path(__file__).resolve().parents[2]
TF_DIR = ROOT / "terraform"
MODULE_DIR = TF_DIR / "modules" / "floe"
EXAMPLE_DIR = TF_DIR / "examples" / "byoc"
TEMPLATES_DIR = MODULE_DIR / "templates"
CLI_RS = ROOT / "src" / "cli.rs"

KAFKA_PORT, HTTP_PORT, METADATA_PORT, METADATA_METRICS_PORT = 9092, 8080, 9093, 9094
FETCH_BOOTSTRAP_PORT = 9095  # the load balancer's bootstrap of the fetch agents (agent_fetch_pool)
ANYWHERE = {"0.0.0.0/0", "::/0"}

# Resource types that take no `tags` argument. Every other resource type must
# be tagged, so a new resource type is tagged unless it is listed here.
UNTAGGABLE = {
    "aws_autoscaling_policy",
    "aws_secretsmanager_secret_version",
    "aws_iam_role_policy",
    "aws_iam_role_policy_attachment",
    "aws_route53_record",
    "aws_s3_bucket_lifecycle_configuration",
    "aws_s3_bucket_logging",
    "aws_s3_bucket_ownership_controls",
    "aws_s3_bucket_policy",
    "aws_s3_bucket_public_access_block",
    "aws_s3_bucket_server_side_encryption_configuration",
    "aws_s3_bucket_versioning",
    "aws_security_group_rule",
    "aws_volume_attachment",
    # The tls provider's resources live in the state only.
    "tls_cert_request",
    "tls_locally_signed_cert",
    "tls_private_key",
    "tls_self_signed_cert",
}
# Tagged through their own block shape rather than a `tags` argument.
TAGGED_BY_TAG_BLOCKS = {"aws_autoscaling_group"}

_OPTIONS = SerializationOptions(
    with_comments=False,
    explicit_blocks=False,
    strip_string_quotes=True,
    preserve_heredocs=False,
)


# ---------------------------------------------------------------- loading


def _unquote(key: str) -> str:
    return key[1:-1] if len(key) >= 2 and key[0] == key[-1] == '"' else key


def _normalize(node):
    """Strips the quotes python-hcl2 keeps around block labels."""
    if isinstance(node, dict):
        return {_unquote(k): _normalize(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_normalize(v) for v in node]
    return node


@functools.cache
def parsed() -> dict[Path, dict]:
    files = sorted(TF_DIR.rglob("*.tf"))
    assert files, f"no .tf files under {TF_DIR}"
    out = {}
    for path in files:
        with path.open() as f:
            out[path] = _normalize(hcl2.load(f, serialization_options=_OPTIONS))
    return out


def module_files(directory: Path) -> dict[Path, dict]:
    return {p: d for p, d in parsed().items() if p.parent == directory}


def labelled(directory: Path, kind: str) -> dict[str, dict]:
    """`variable`/`output` blocks of one module: name -> body."""
    found = {}
    for doc in module_files(directory).values():
        for block in doc.get(kind, []):
            for name, body in block.items():
                assert name not in found, f"{kind} {name} declared twice"
                found[name] = body
    return found


def resources(kind: str = "resource", directory: Path = MODULE_DIR) -> list[tuple[str, str, dict]]:
    """(type, name, body) of every resource (or data source) in a module."""
    found = []
    for doc in module_files(directory).values():
        for block in doc.get(kind, []):
            for rtype, named in block.items():
                for name, body in named.items():
                    found.append((rtype, name, body))
    return found


def resources_of(rtype: str, kind: str = "resource") -> dict[str, dict]:
    return {name: body for t, name, body in resources(kind) if t == rtype}


@functools.cache
def module_locals() -> dict:
    merged = {}
    for doc in module_files(MODULE_DIR).values():
        for block in doc.get("locals", []):
            merged.update(block)
    return merged


def one(value):
    """Unwraps python-hcl2's one-element list around a nested block."""
    if isinstance(value, list):
        assert len(value) == 1, value
        return value[0]
    return value


def all_blocks(value) -> list:
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


def text(value) -> str:
    return json.dumps(value) if not isinstance(value, str) else value


def resolve(value):
    """Evaluates a literal or a bare `${local.x}` reference; None if neither."""
    if isinstance(value, (int, float, bool)):
        return value
    if isinstance(value, str):
        m = re.fullmatch(r"\$\{local\.(\w+)\}", value)
        if m:
            return resolve(module_locals()[m.group(1)])
        if m := re.fullmatch(r"\$\{tostring\(local\.(\w+)\)\}", value):
            return resolve(module_locals()[m.group(1)])
        if "${" not in value:
            return int(value) if value.isdigit() else value
    return None


def referenced_locals_text(expr: str, seen: set[str] | None = None) -> str:
    """The expression plus, recursively, the text of every local it names."""
    seen = set() if seen is None else seen
    out = [expr]
    for name in re.findall(r"local\.(\w+)", expr):
        if name not in seen and name in module_locals():
            seen.add(name)
            out.append(referenced_locals_text(text(module_locals()[name]), seen))
    return "\n".join(out)


def possible_ports(rule: dict) -> set[int] | None:
    """Ports a security group rule may open; None means all ports."""
    if str(rule.get("ip_protocol", rule.get("protocol", "tcp"))) in {"-1", "all"}:
        return None
    low, high = resolve(rule.get("from_port")), resolve(rule.get("to_port"))
    if isinstance(low, int) and isinstance(high, int):
        return set(range(low, high + 1))
    # Ports taken from each.value: every port the for_each expression (and the
    # locals it names) could produce.
    source = referenced_locals_text(text(rule.get("for_each", "")))
    ports = {int(resolve(module_locals()[n])) for n in re.findall(r"local\.(\w+_port)\b", source)}
    ports |= {int(p) for p in re.findall(r"(?<![\w.])(\d{2,5})(?![\w.])", source)}
    assert ports, f"cannot tell which ports rule opens: {rule}"
    return ports


# ---------------------------------------------------------------- files and versions


def test_every_tf_file_parses():
    assert len(parsed()) >= 10
    for path in (MODULE_DIR / "versions.tf", EXAMPLE_DIR / "versions.tf", EXAMPLE_DIR / "main.tf"):
        assert path in parsed(), f"missing {path.relative_to(ROOT)}"


@pytest.mark.parametrize("directory", [MODULE_DIR, EXAMPLE_DIR], ids=["module", "example"])
def test_terraform_and_aws_provider_are_pinned(directory):
    blocks = [b for doc in module_files(directory).values() for b in doc.get("terraform", [])]
    assert len(blocks) == 1, "one terraform block per module"
    block = blocks[0]
    assert re.match(r">=\s*1\.\d", block["required_version"])
    aws = one(block["required_providers"])["aws"]
    assert aws["source"] == "hashicorp/aws"
    assert re.fullmatch(r"~>\s*5\.\d+", aws["version"]), aws["version"]
    # 4.x: private_key_pem_pkcs8, no key_algorithm arguments.
    tls = one(block["required_providers"])["tls"]
    assert tls["source"] == "hashicorp/tls"
    assert re.fullmatch(r"~>\s*4\.\d+", tls["version"]), tls["version"]


def test_example_calls_the_module():
    calls = [b for doc in module_files(EXAMPLE_DIR).values() for b in doc.get("module", [])]
    floe = calls[0]["floe"]
    assert floe["source"] == "../../modules/floe"
    for required in ("vpc_id", "agent_subnet_ids", "metadata_subnet_ids", "client_cidr_blocks", "floe_binary_source", "tags",
                     "allow_unauthenticated", "tls_certificate_arn", "tls_secret_arn", "operator_token_secret_arn",
                     "client_endpoint_dns_name", "max_connections_per_ip", "metadata_mtls"):
        assert required in floe, f"example does not pass {required}"
    # The example is as strict as the module: no TLS, no plan, unless asked.
    example_vars = labelled(EXAMPLE_DIR, "variable")
    assert example_vars["allow_unauthenticated"]["default"] is False
    assert example_vars["tls_certificate_arn"]["default"] is None
    assert example_vars["tls_secret_arn"]["default"] is None
    assert example_vars["metadata_mtls"]["default"] is True
    tfvars = (EXAMPLE_DIR / "terraform.tfvars.example").read_text()
    assert re.search(r"^tls_certificate_arn\s*=", tfvars, re.M) or re.search(r"^tls_secret_arn\s*=", tfvars, re.M), \
        "terraform.tfvars.example must show a TLS option"
    assert not re.search(r"^allow_unauthenticated\s*=\s*true", tfvars, re.M)
    assert not re.search(r"^metadata_mtls\s*=\s*false", tfvars, re.M)
    outputs = labelled(EXAMPLE_DIR, "output")
    for name in ("bootstrap_servers", "http_endpoint", "bucket_name", "metadata_tls_operator_secret_arn"):
        assert name in outputs


# ---------------------------------------------------------------- variables and outputs


@pytest.mark.parametrize("directory", [MODULE_DIR, EXAMPLE_DIR], ids=["module", "example"])
def test_every_variable_has_description_and_type(directory):
    variables = labelled(directory, "variable")
    assert variables
    for name, body in variables.items():
        assert len(body.get("description", "")) >= 10, f"variable {name} lacks a description"
        assert "type" in body, f"variable {name} lacks a type"


@pytest.mark.parametrize("directory", [MODULE_DIR, EXAMPLE_DIR], ids=["module", "example"])
def test_every_constrained_variable_has_validation(directory):
    # A bool's domain is its type; every other variable (string, number,
    # list, map) admits values the module cannot use, so it must validate.
    for name, body in labelled(directory, "variable").items():
        if body["type"] in ("bool", "${bool}"):
            continue
        validations = body.get("validation", [])
        assert validations, f"variable {name} ({body['type']}) has no validation block"
        for v in validations:
            assert f"var.{name}" in v["condition"], f"validation of {name} does not test var.{name}"
            assert v["error_message"].endswith("."), f"error_message of {name} is not a sentence"


def test_client_cidr_validation_refuses_anywhere():
    for directory in (MODULE_DIR, EXAMPLE_DIR):
        condition = labelled(directory, "variable")["client_cidr_blocks"]["validation"][0]["condition"]
        assert '"0.0.0.0/0"' in condition and "cidrnetmask" in condition, condition
    # cidrnetmask() accepts only IPv4, so ::/0 cannot pass either.
    monitoring = labelled(MODULE_DIR, "variable")["monitoring_cidr_blocks"]["validation"][0]["condition"]
    assert '"0.0.0.0/0"' in monitoring and "cidrnetmask" in monitoring


def test_object_lock_is_off_by_default():
    assert labelled(MODULE_DIR, "variable")["object_lock_enabled"]["default"] is False
    bucket = resources_of("aws_s3_bucket")["this"]
    assert bucket["object_lock_enabled"] == "${var.object_lock_enabled}"


def test_outputs_are_documented_and_complete():
    outputs = labelled(MODULE_DIR, "output")
    for name in ("bootstrap_servers", "http_endpoint", "bucket_name", "role_arn", "metadata_role_arn",
                 "prometheus_scrape_config", "metadata_tls_operator_secret_arn", "metadata_tls_ca_cert_pem"):
        assert name in outputs, f"module lacks output {name}"
    for name, body in outputs.items():
        assert body.get("description"), f"output {name} lacks a description"
    assert "9092" in text(resolve(module_locals()["kafka_port"])) or module_locals()["kafka_port"] == KAFKA_PORT
    assert "local.kafka_port" in outputs["bootstrap_servers"]["value"]


# ---------------------------------------------------------------- bucket


def test_bucket_blocks_public_access():
    blocks = resources_of("aws_s3_bucket_public_access_block")
    assert len(blocks) == 1
    body = one(list(blocks.values()))
    assert body["bucket"] == "${aws_s3_bucket.this.id}"
    for flag in ("block_public_acls", "block_public_policy", "ignore_public_acls", "restrict_public_buckets"):
        assert body[flag] is True, flag
    ownership = one(resources_of("aws_s3_bucket_ownership_controls")["this"]["rule"])
    assert ownership["object_ownership"] == "BucketOwnerEnforced"


def test_bucket_has_default_encryption():
    sse = resources_of("aws_s3_bucket_server_side_encryption_configuration")["this"]
    assert sse["bucket"] == "${aws_s3_bucket.this.id}"
    default = one(one(sse["rule"])["apply_server_side_encryption_by_default"])
    assert "AES256" in default["sse_algorithm"] and "aws:kms" in default["sse_algorithm"]


def test_bucket_lifecycle_aborts_incomplete_multipart_uploads():
    lifecycle = resources_of("aws_s3_bucket_lifecycle_configuration")["this"]
    assert lifecycle["bucket"] == "${aws_s3_bucket.this.id}"
    rules = [r for r in all_blocks(lifecycle["rule"]) if "abort_incomplete_multipart_upload" in r]
    assert len(rules) == 1
    rule = rules[0]
    assert rule["status"] == "Enabled"
    assert one(rule["filter"]) in ({}, None), "the abort rule must cover the whole bucket"
    days = one(rule["abort_incomplete_multipart_upload"])["days_after_initiation"]
    assert days == "${var.abort_incomplete_multipart_upload_days}"
    assert labelled(MODULE_DIR, "variable")["abort_incomplete_multipart_upload_days"]["default"] <= 7


def policy_statements(document: dict) -> list[dict]:
    """Plain and dynamic statements of an aws_iam_policy_document."""
    statements = list(all_blocks(document.get("statement")))
    for dyn in all_blocks(document.get("dynamic")):
        for label, body in dyn.items():
            assert label == "statement"
            content = dict(one(body["content"]))
            content["__for_each"] = body["for_each"]
            statements.append(content)
    return statements


def test_bucket_policy_denies_plain_http_and_other_principals():
    policy = resources_of("aws_s3_bucket_policy")["this"]
    assert policy["policy"] == "${data.aws_iam_policy_document.bucket.json}"
    statements = policy_statements(resources_of("aws_iam_policy_document", "data")["bucket"])

    def conditions(s):
        return [one([c]) for c in all_blocks(s.get("condition"))]

    tls = [s for s in statements if s.get("effect") == "Deny"
           and any(c["variable"] == "aws:SecureTransport" and c["values"] == ["false"] for c in conditions(s))]
    assert len(tls) == 1, "no statement denies requests without TLS"
    assert tls[0]["actions"] == ["s3:*"]

    fence = [s for s in statements if s.get("effect") == "Deny"
             and any(c["variable"] == "aws:PrincipalArn" and c["test"] == "ArnNotEquals" for c in conditions(s))]
    assert len(fence) == 1, "no statement denies object access to principals other than the Floe roles"
    assert "local.instance_role_arns" in text(fence[0]["condition"])
    # The agents' role and the metadata nodes' role, and nothing else.
    assert module_locals()["instance_role_arns"] == ["${aws_iam_role.floe.arn}", "${aws_iam_role.metadata.arn}"]

    for s in statements:
        if s.get("effect", "Allow") == "Allow":
            principals = one(s["principals"])
            assert principals["identifiers"] == "${local.instance_role_arns}", s


# ---------------------------------------------------------------- IAM


ALLOWED_S3_RESOURCES = ("${local.bucket_arn}", "${local.prefix_object_arn}")


def test_s3_permissions_name_only_the_bucket_and_prefix():
    locals_ = module_locals()
    assert locals_["bucket_arn"] == "${aws_s3_bucket.this.arn}"
    assert locals_["prefix_object_arn"] == "${aws_s3_bucket.this.arn}/${var.bucket_prefix}/*"

    documents = resources_of("aws_iam_policy_document", "data")
    checked = 0
    for doc_name, document in documents.items():
        for s in policy_statements(document):
            actions = s.get("actions", [])
            resources_ = s.get("resources", [])
            if actions == ["cloudwatch:PutMetricData"]:
                # PutMetricData has no resource ARNs: it must be held to Floe's namespace.
                condition = one(s["condition"])
                assert condition["variable"] == "cloudwatch:namespace" and condition["test"] == "StringEquals"
                assert condition["values"] == ["${local.utilization_namespace}"]
                continue
            assert "*" not in resources_, f"{doc_name}: statement with resource *"
            if not any(a.startswith("s3:") for a in actions):
                continue
            checked += 1
            assert resources_, f"{doc_name}: s3 statement without resources"
            for r in resources_:
                if r == "${statement.value}":
                    # The one dynamic S3 grant: reading the floe binary object.
                    assert s["__for_each"] == "${local.binary_s3_object_arn == null ? [] : [local.binary_s3_object_arn]}"
                    assert actions == ["s3:GetObject"]
                    continue
                assert r.startswith(ALLOWED_S3_RESOURCES), f"{doc_name}: s3 resource {r}"
    assert checked >= 5


def test_role_policies_come_from_policy_documents():
    for name, body in resources_of("aws_iam_role_policy").items():
        assert re.fullmatch(r"\$\{data\.aws_iam_policy_document\.\w+\.json\}", body["policy"]), name
    for name, body in resources_of("aws_iam_role_policy_attachment").items():
        assert body["policy_arn"].endswith(":iam::aws:policy/AmazonSSMManagedInstanceCore"), name
    assume = one(resources_of("aws_iam_policy_document", "data")["assume_ec2"]["statement"])
    assert one(assume["principals"])["identifiers"] == ["ec2.amazonaws.com"]


# ---------------------------------------------------------------- TLS, SASL, API keys, secrets


def launch_template_preconditions() -> list[dict]:
    lifecycle = one(resources_of("aws_launch_template")["agent"]["lifecycle"])
    return all_blocks(lifecycle["precondition"])


def terraform_regex(condition: str) -> re.Pattern:
    """The first regex("...") of a validation condition, for Python's re
    (the patterns used here mean the same in RE2)."""
    m = re.search(r'regex\("((?:[^"\\]|\\.)*)"', condition)
    assert m, condition
    return re.compile(m.group(1).replace("\\\\", "\\"))


def test_security_is_on_by_default():
    variables = labelled(MODULE_DIR, "variable")
    assert variables["allow_unauthenticated"]["default"] is False
    assert variables["allow_unauthenticated"]["type"] in ("bool", "${bool}")
    for name in ("tls_certificate_arn", "tls_secret_arn", "operator_token_secret_arn", "secrets_kms_key_arn",
                 "client_endpoint_dns_name", "agent_advertised_address"):
        assert variables[name]["default"] is None, name
    assert variables["sasl_enable_plain"]["default"] is False
    assert variables["max_connections_per_ip"]["default"] == 1000
    assert variables["max_connections"]["default"] == 10000
    assert variables["auth_failures_per_minute"]["default"] == 10


def test_a_plan_without_tls_fails_unless_unauthenticated_is_chosen():
    conditions = {p["condition"]: p["error_message"] for p in launch_template_preconditions()}
    need_tls = "${var.allow_unauthenticated || var.tls_certificate_arn != null || var.tls_secret_arn != null}"
    assert need_tls in conditions, conditions
    assert "allow_unauthenticated = true" in conditions[need_tls]
    assert "${var.tls_certificate_arn == null || var.tls_secret_arn == null}" in conditions
    # PLAIN only with TLS, and never in the unauthenticated mode.
    plain = [c for c in conditions if c.startswith("${!var.sasl_enable_plain ||")]
    assert len(plain) == 1 and "!var.allow_unauthenticated" in plain[0] and "var.tls_certificate_arn != null" in plain[0]
    # The operator token never crosses the network in the clear.
    assert "${var.operator_token_secret_arn == null || var.tls_certificate_arn != null || var.tls_secret_arn != null}" in conditions
    for message in conditions.values():
        assert message.endswith("."), message


def test_secret_and_certificate_arns_are_validated_whole():
    variables = labelled(MODULE_DIR, "variable")
    secret = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:floe/tls-AbCdEf"
    for name in ("tls_secret_arn", "operator_token_secret_arn"):
        pattern = terraform_regex(variables[name]["validation"][0]["condition"])
        assert pattern.fullmatch(secret), name
        for bad in ("arn:aws:secretsmanager:eu-west-1:123456789012:secret:*",
                    "arn:aws:secretsmanager:eu-west-1:123456789012:secret:floe/*",
                    "arn:aws:secretsmanager:eu-west-1:123456789012:secret:floe",
                    "arn:aws:s3:::bucket/key", "floe/tls"):
            assert not pattern.fullmatch(bad), (name, bad)
    acm = terraform_regex(variables["tls_certificate_arn"]["validation"][0]["condition"])
    assert acm.fullmatch("arn:aws:acm:eu-west-1:123456789012:certificate/0a1b2c3d-0a1b-0a1b-0a1b-0a1b2c3d4e5f")
    assert not acm.fullmatch("arn:aws:acm:eu-west-1:123456789012:certificate/*")


ROLE_POLICIES = {"agent": "floe", "metadata": "metadata"}  # policy document -> role


def test_secrets_get_least_privilege_iam():
    documents = resources_of("aws_iam_policy_document", "data")
    role_policies = resources_of("aws_iam_role_policy")
    profiles = resources_of("aws_iam_instance_profile")
    # One role per kind of instance, each with its own document; both share
    # the object-store statements and nothing else.
    for doc, role in ROLE_POLICIES.items():
        assert role_policies[role]["role"] == f"${{aws_iam_role.{role}.id}}"
        assert role_policies[role]["policy"] == f"${{data.aws_iam_policy_document.{doc}.json}}"
        assert documents[doc]["source_policy_documents"] == ["${data.aws_iam_policy_document.objects.json}"]
        assert profiles[role]["role"] == f"${{aws_iam_role.{role}.name}}"
    assert one(resources_of("aws_launch_template")["agent"]["iam_instance_profile"])["arn"] == \
        "${aws_iam_instance_profile.floe.arn}"
    assert resources_of("aws_instance")["metadata"]["iam_instance_profile"] == "${aws_iam_instance_profile.metadata.name}"

    all_statements = [s for d in documents.values() for s in policy_statements(d)]
    grants = []
    for doc in ROLE_POLICIES:
        statements = policy_statements(documents[doc])
        secrets = [s for s in statements if any(a.startswith("secretsmanager:") for a in s.get("actions", []))]
        assert len(secrets) == 1, secrets
        grant = secrets[0]
        grants.append(grant)
        assert grant["actions"] == ["secretsmanager:GetSecretValue"]
        assert grant["__for_each"] == f"${{length(local.{doc}_secret_arns) == 0 ? [] : [local.{doc}_secret_arns]}}"
        assert grant["resources"] == "${statement.value}"
        assert grant.get("effect", "Allow") == "Allow" and "condition" not in grant
        # A customer key for the secrets: decrypt only, through Secrets Manager
        # only, in the secrets' own regions.
        key = [s for s in statements if s.get("sid") == "FloeSecretsKey"]
        assert len(key) == 1
        assert key[0]["actions"] == ["kms:Decrypt"]
        assert "var.secrets_kms_key_arn" in key[0]["__for_each"] and f"local.{doc}_secret_arns" in key[0]["__for_each"]
        via = one(key[0]["condition"])
        assert via["variable"] == "kms:ViaService"
        assert via["values"] == f'${{[for r in local.{doc}_secret_regions : "secretsmanager.${{r}}.amazonaws.com"]}}'
    # No statement anywhere uses a wildcard action or names Secrets Manager by pattern.
    for s in all_statements:
        for action in s.get("actions", []):
            assert "*" not in action or s.get("effect") == "Deny", s
        assert "secretsmanager" not in text(s.get("resources", "")) or any(s is g for g in grants), s
    # Which secrets those are, evaluated: see test_each_role_reads_only_its_own_secrets.


def test_agent_extra_args_cannot_override_the_security_flags():
    validations = labelled(MODULE_DIR, "variable")["agent_extra_args"]["validation"]
    managed = [v for v in validations if v["condition"].startswith("${alltrue([for a in var.agent_extra_args : !can(")]
    assert len(managed) == 1
    pattern = terraform_regex(managed[0]["condition"])
    for flag in ("--tls-cert", "--tls-key", "--sasl-mechanisms", "--http-require-api-key", "--operator-token-file",
                 "--max-connections", "--max-connections-per-ip", "--max-connections-per-ip=5", "--node-id",
                 "--advertised-addr", "--metadata-tls-cert", "--metadata-tls-key=/tmp/k.pem", "--metadata-tls-ca"):
        assert pattern.fullmatch(flag), flag
    for flag in ("--flush-interval-ms", "--max-connections-per-ip-overrides", "--sasl-session-lifetime-ms",
                 "--authorizer", "--super-users=root"):
        assert not pattern.fullmatch(flag), flag


# ---------------------------------------------------------------- metadata port: certificates and their secrets


TLS_RESOURCE_TYPES = ("tls_private_key", "tls_self_signed_cert", "tls_cert_request", "tls_locally_signed_cert")


def test_metadata_mtls_is_on_by_default():
    variables = labelled(MODULE_DIR, "variable")
    assert variables["metadata_mtls"]["default"] is True
    assert variables["metadata_mtls"]["type"] in ("bool", "${bool}")
    assert variables["metadata_tls_validity_days"]["default"] == 365
    assert "var.metadata_tls_validity_days >= 60" in variables["metadata_tls_validity_days"]["validation"][0]["condition"]
    assert module_locals()["metadata_trust_domain"] == "${var.name}.${var.dns_zone_name}"
    assert module_locals()["metadata_tls_identities"].startswith("${var.metadata_mtls ? merge(")
    assert module_locals()["metadata_tls_identities"].endswith(") : {}}")


def test_only_pki_tf_uses_the_tls_provider():
    # So that the validation below can stand locals in for pki.tf.
    for path in MODULE_DIR.glob("*.tf"):
        if path.name in ("pki.tf", "versions.tf"):
            continue
        source = path.read_text()
        for rtype in TLS_RESOURCE_TYPES:
            assert f"{rtype}." not in source, f"{path.name} uses {rtype}"
    for rtype, _, _ in resources():
        if rtype.startswith("tls_"):
            assert rtype in TLS_RESOURCE_TYPES, rtype
    locals_ = [b for b in parsed()[MODULE_DIR / "pki.tf"].get("locals", [])]
    assert {k for b in locals_ for k in b} == set(PKI_STUB_LOCALS)


def test_certificates_are_ecdsa_p256_from_one_ca_with_the_roles_uses():
    keys = resources_of("tls_private_key")
    assert set(keys) == {"metadata_ca", "metadata"}
    for name, key in keys.items():
        assert key["algorithm"] == "ECDSA" and key["ecdsa_curve"] == "P256", name
    assert keys["metadata_ca"]["count"] == "${var.metadata_mtls ? 1 : 0}"
    assert keys["metadata"]["for_each"] == "${local.metadata_tls_identities}"

    ca = resources_of("tls_self_signed_cert")["metadata_ca"]
    assert ca["count"] == "${var.metadata_mtls ? 1 : 0}"
    assert ca["is_ca_certificate"] is True
    assert ca["allowed_uses"] == ["cert_signing", "crl_signing"]
    assert ca["validity_period_hours"] == "${10 * 365 * 24}"
    assert "early_renewal_hours" not in ca, "a renewed CA would replace every certificate at once"

    csr = resources_of("tls_cert_request")["metadata"]
    assert csr["for_each"] == "${local.metadata_tls_identities}"
    assert csr["uris"] == ["${each.value.uri}"]
    assert csr["dns_names"] == "${each.value.dns_names}"
    assert "ip_addresses" not in csr
    cert = resources_of("tls_locally_signed_cert")["metadata"]
    assert cert["for_each"] == "${local.metadata_tls_identities}"
    assert cert["ca_private_key_pem"] == "${tls_private_key.metadata_ca[0].private_key_pem}"
    assert cert["ca_cert_pem"] == "${tls_self_signed_cert.metadata_ca[0].cert_pem}"
    assert cert["allowed_uses"] == "${each.value.uses}"
    assert cert["validity_period_hours"] == "${var.metadata_tls_validity_days * 24}"
    # Renewal starts 30 days before expiry, well inside the shortest validity (60 days).
    assert cert["early_renewal_hours"] == "${30 * 24}"

    identities = module_locals()["metadata_tls_identities"]
    assert 'uri = "spiffe://${local.metadata_trust_domain}/floe/peer/${id}", dns_names = [n.fqdn], ' \
        'uses = ["digital_signature", "server_auth", "client_auth"]' in identities
    # Agents serve each other blocks on the peer port with it, so it has serverAuth too.
    assert 'agent = {uri = "spiffe://${local.metadata_trust_domain}/floe/agent/0", dns_names = [], ' \
        'uses = ["digital_signature", "server_auth", "client_auth"]}' in identities
    assert 'operator = {uri = "spiffe://${local.metadata_trust_domain}/floe/operator/admin", dns_names = [], ' \
        'uses = ["digital_signature", "client_auth"]}' in identities
    bundles = text(module_locals()["metadata_tls_bundles"])
    assert "private_key_pem_pkcs8" in bundles and "tls_self_signed_cert.metadata_ca[0].cert_pem" in bundles


def test_each_certificate_has_its_own_encrypted_secret_read_before_boot():
    secret = resources_of("aws_secretsmanager_secret")["metadata_tls"]
    version = resources_of("aws_secretsmanager_secret_version")["metadata_tls"]
    assert set(resources_of("aws_secretsmanager_secret")) == {"metadata_tls"}
    for body in (secret, version):
        assert body["for_each"] == "${local.metadata_tls_identities}"
    assert secret["kms_key_id"] == "${var.secrets_kms_key_arn}"
    assert secret["name_prefix"] == "${var.name}/metadata-tls/${each.key}-"
    assert version["secret_id"] == "${aws_secretsmanager_secret.metadata_tls[each.key].id}"
    assert version["secret_string"] == "${jsonencode(local.metadata_tls_bundles[each.key])}"
    # Instances read their secret at first boot: it must hold the certificate by then.
    for body in (resources_of("aws_instance")["metadata"], resources_of("aws_launch_template")["agent"]):
        assert body["depends_on"] == ["${aws_secretsmanager_secret_version.metadata_tls}"]
    # The operator's secret is an output, and in no instance role's list.
    outputs = labelled(MODULE_DIR, "output")
    assert outputs["metadata_tls_operator_secret_arn"]["value"] == \
        '${var.metadata_mtls ? aws_secretsmanager_secret.metadata_tls["operator"].arn : null}'
    assert "state" in (MODULE_DIR / "pki.tf").read_text().lower()


# ---------------------------------------------------------------- security groups


def ingress_rules() -> list[tuple[str, dict]]:
    """Every ingress rule in any of Terraform's three spellings."""
    rules = []
    for rtype, name, body in resources():
        if rtype == "aws_vpc_security_group_ingress_rule":
            rules.append((f"{rtype}.{name}", body))
        elif rtype == "aws_security_group_rule" and body.get("type") == "ingress":
            rules.append((f"{rtype}.{name}", body))
        elif rtype == "aws_security_group":
            for i, block in enumerate(all_blocks(body.get("ingress"))):
                rules.append((f"{rtype}.{name}.ingress[{i}]", block))
            for dyn in all_blocks(body.get("dynamic")):
                if "ingress" in dyn:
                    rules.append((f"{rtype}.{name}.dynamic.ingress", one(dyn["ingress"]["content"])))
    return rules


def rule_cidrs(rule: dict) -> list[str]:
    cidrs = []
    for key in ("cidr_ipv4", "cidr_ipv6", "cidr_blocks", "ipv6_cidr_blocks"):
        value = rule.get(key)
        cidrs.extend(value if isinstance(value, list) else [value] if value else [])
    return cidrs


def test_there_are_ingress_rules_to_check():
    assert len(ingress_rules()) >= 6


def test_no_ingress_is_open_to_anywhere():
    for name, rule in ingress_rules():
        for cidr in rule_cidrs(rule):
            assert cidr not in ANYWHERE, f"{name} opens {cidr}"
            if "${" in cidr:
                # A computed CIDR must come from a validated client list.
                # (Scalar variables may choose whether the rule exists, as
                # the advertised address does for agent_clients.)
                source = referenced_locals_text(text(rule.get("for_each", "")) + cidr)
                variables = labelled(MODULE_DIR, "variable")
                lists = {v for v in re.findall(r"var\.(\w+)", source) if "list" in variables[v]["type"]}
                assert lists and lists <= {"client_cidr_blocks", "monitoring_cidr_blocks"}, f"{name}: CIDR from {lists}"
    # Nothing anywhere spells the IPv6 wildcard, and 0.0.0.0/0 appears only in
    # egress rules and in the validations that refuse it.
    for path in TF_DIR.rglob("*.tf"):
        source = path.read_text()
        assert "::/0" not in source, path
        for line in source.splitlines():
            code = line.split("#", 1)[0]
            if "0.0.0.0/0" in code:
                allowed = ("cidr_ipv4", "!=", "error_message", "description")
                assert any(a in code for a in allowed), (path, line)
    for rtype, name, body in resources():
        if body.get("cidr_ipv4") == "0.0.0.0/0":
            assert rtype == "aws_vpc_security_group_egress_rule", name
            assert body["from_port"] == body["to_port"] == 443, f"{name}: egress to anywhere beyond HTTPS"


def test_metadata_port_is_open_only_to_agents_and_metadata_nodes():
    assert module_locals()["metadata_port"] == METADATA_PORT
    allowed = {"${aws_security_group.agent.id}", "${aws_security_group.metadata.id}"}
    reaching = []
    for name, rule in ingress_rules():
        ports = possible_ports(rule)
        if ports is None or METADATA_PORT in ports:
            reaching.append(name)
            assert ports == {METADATA_PORT}, f"{name} opens a range that includes {METADATA_PORT}"
            assert not rule_cidrs(rule), f"{name} opens {METADATA_PORT} to CIDRs"
            assert rule.get("referenced_security_group_id") in allowed, f"{name}: {rule.get('referenced_security_group_id')}"
            assert rule.get("security_group_id") == "${aws_security_group.metadata.id}", name
    assert len(reaching) == 2, reaching


def test_clients_reach_only_kafka_and_http():
    """CIDRs reach the agents' Kafka and HTTP ports; the metadata nodes' metrics port only from
    the monitoring CIDRs."""
    assert module_locals()["metadata_metrics_port"] == METADATA_METRICS_PORT
    for name, rule in ingress_rules():
        if not rule_cidrs(rule):
            continue
        if possible_ports(rule) == {METADATA_METRICS_PORT}:
            assert rule.get("security_group_id") == "${aws_security_group.metadata.id}", name
            assert "var.monitoring_cidr_blocks" in str(rule.get("for_each")), f"{name}: {rule.get('for_each')}"
            continue
        # (The load balancer's fetch bootstrap forwards to the agents' Kafka port.)
        assert possible_ports(rule) <= {KAFKA_PORT, HTTP_PORT, FETCH_BOOTSTRAP_PORT}, name


# ---------------------------------------------------------------- load balancer


def test_nlb_is_internal_with_cross_zone_off():
    lbs = resources_of("aws_lb")
    assert lbs
    for name, lb in lbs.items():
        assert lb["load_balancer_type"] == "network"
        assert lb["enable_cross_zone_load_balancing"] is False, name
        assert lb["internal"] is True, name
        assert lb["subnets"] == "${var.agent_subnet_ids}"


def test_target_groups_check_readyz():
    groups = resources_of("aws_lb_target_group")
    assert groups
    for name, tg in groups.items():
        assert tg["protocol"] == "TCP", name
        hc = one(tg["health_check"])
        # HTTPS exactly when the agents terminate TLS themselves; /readyz
        # needs no API key in any mode.
        assert hc["protocol"] == '${local.tls_mode == "agent" ? "HTTPS" : "HTTP"}', name
        assert hc["path"] == "/readyz", name
        assert resolve(hc["port"]) == HTTP_PORT, name
    assert groups["agent"]["for_each"] == "${local.nlb_targets}"
    targets = module_locals()["nlb_targets"]
    assert "kafka = {port = local.kafka_port, listener_port = local.kafka_port}" in text(targets)
    assert "http = {port = local.http_port, listener_port = local.http_port}" in text(targets)
    # The fetch agents' bootstrap is a listener port of its own, onto the same agent port.
    assert "fetch = {port = local.kafka_port, listener_port = local.fetch_bootstrap_port}" in text(targets)


def test_listeners_terminate_tls_with_the_acm_certificate_or_pass_through():
    listeners = resources_of("aws_lb_listener")
    assert set(listeners) == {"agent", "agent_tls"}
    tcp, tls = listeners["agent"], listeners["agent_tls"]
    # Exactly one of the two exists for each target group.
    assert tcp["for_each"] == '${local.tls_mode == "nlb" ? {} : aws_lb_target_group.agent}'
    assert tls["for_each"] == '${local.tls_mode == "nlb" ? aws_lb_target_group.agent : {}}'
    assert tcp["protocol"] == "TCP"
    assert tls["protocol"] == "TLS"
    assert tls["certificate_arn"] == "${var.tls_certificate_arn}"
    assert tls["ssl_policy"] == "${var.nlb_tls_policy}"
    for body in (tcp, tls):
        assert one(body["default_action"])["target_group_arn"] == "${each.value.arn}"
        assert body["port"] == "${local.nlb_targets[each.key].listener_port}"
    policy = labelled(MODULE_DIR, "variable")["nlb_tls_policy"]
    assert policy["default"].startswith("ELBSecurityPolicy-TLS13-")
    assert "TLS13-|TLS-1-2-|FS-1-2-" in policy["validation"][0]["condition"]
    assert module_locals()["tls_mode"] == \
        '${var.tls_certificate_arn != null ? "nlb" : var.tls_secret_arn != null ? "agent" : "none"}'


def test_with_tls_on_the_load_balancer_every_connection_goes_through_it():
    # Agents behind a TLS-terminating NLB speak plaintext: they must advertise
    # the load balancer, and clients must not reach them directly.
    advertised = module_locals()["advertised_address"]
    assert advertised == '${coalesce(var.agent_advertised_address, local.tls_mode == "nlb" ? "load_balancer" : "private_ip")}'
    assert module_locals()["endpoint_host"] == "${coalesce(var.client_endpoint_dns_name, aws_lb.this.dns_name)}"
    direct = resources_of("aws_vpc_security_group_ingress_rule")["agent_clients"]
    assert direct["for_each"] == '${local.advertised_address == "load_balancer" ? {} : local.client_ingress}'
    conditions = [p["condition"] for p in launch_template_preconditions()]
    assert '${var.tls_certificate_arn == null || local.advertised_address == "load_balancer"}' in conditions
    assert "${var.tls_certificate_arn == null || var.client_endpoint_dns_name != null}" in conditions
    validation = labelled(MODULE_DIR, "variable")["agent_advertised_address"]["validation"][0]["condition"]
    assert '"load_balancer"' in validation
    record = resources_of("aws_route53_record")["endpoint"]
    assert record["name"] == "${var.client_endpoint_dns_name}"
    assert one(record["alias"])["name"] == "${aws_lb.this.dns_name}"


# ---------------------------------------------------------------- instances


def test_imdsv2_is_required_everywhere():
    launch_templates = resources_of("aws_launch_template")
    instances = resources_of("aws_instance")
    assert launch_templates and instances
    for name, body in {**launch_templates, **instances}.items():
        options = one(body["metadata_options"])
        assert options["http_tokens"] == "required", name
        assert options["http_put_response_hop_limit"] == 1, name


def test_every_ebs_volume_is_encrypted():
    volumes = resources_of("aws_ebs_volume")
    assert len(volumes) == 1
    for name, body in volumes.items():
        assert body["encrypted"] is True, name
    for name, body in resources_of("aws_instance").items():
        assert one(body["root_block_device"])["encrypted"] is True, name
        for block in all_blocks(body.get("ebs_block_device")):
            assert block["encrypted"] is True, name
    for name, body in resources_of("aws_launch_template").items():
        mappings = all_blocks(body["block_device_mappings"])
        assert mappings
        for mapping in mappings:
            assert one(mapping["ebs"])["encrypted"] is True, name


def test_three_metadata_nodes_with_own_volumes_and_names():
    assert "length(var.metadata_subnet_ids) == 3" in labelled(MODULE_DIR, "variable")["metadata_subnet_ids"]["validation"][0]["condition"]
    instance = resources_of("aws_instance")["metadata"]
    volume = resources_of("aws_ebs_volume")["metadata"]
    attachment = resources_of("aws_volume_attachment")["metadata"]
    record = resources_of("aws_route53_record")["metadata"]
    for body in (instance, volume, attachment, record):
        assert body["for_each"] == "${local.metadata_nodes}"
    assert volume["availability_zone"] == "${each.value.az}"
    assert attachment["volume_id"] == "${aws_ebs_volume.metadata[each.key].id}"
    assert record["records"] == ["${aws_instance.metadata[each.key].private_ip}"]
    precondition = one(instance["lifecycle"])["precondition"]
    assert any("== 3" in p["condition"] and "az" in p["condition"] for p in all_blocks(precondition))
    # A new AMI must not replace all three nodes in one apply.
    assert set(one(instance["lifecycle"])["ignore_changes"]) >= {"${ami}", "${user_data}"} or \
        "ami" in text(one(instance["lifecycle"])["ignore_changes"])


def test_agents_autoscale_on_their_utilization_across_the_subnets():
    asg = resources_of("aws_autoscaling_group")["agent"]
    assert asg["for_each"] == "${local.agent_pools}"
    assert asg["name"] == "${each.value.asg_name}"
    assert asg["vpc_zone_identifier"] == "${var.agent_subnet_ids}"
    assert asg["health_check_type"] == "ELB"
    assert one(asg["launch_template"])["version"] == "${aws_launch_template.agent[each.key].latest_version}"
    # Each pool's own Kafka bootstrap, and the HTTP API.
    assert asg["target_group_arns"] == \
        ["${aws_lb_target_group.agent[each.value.kafka_target].arn}", '${aws_lb_target_group.agent["http"].arn}']
    assert one(asg["instance_refresh"])["strategy"] == "Rolling"
    policy = resources_of("aws_autoscaling_policy")["agent_utilization"]
    assert policy["policy_type"] == "TargetTrackingScaling"
    tracking = one(policy["target_tracking_configuration"])
    assert tracking["target_value"] == "${var.agent_utilization_target}"
    spec = one(tracking["customized_metric_specification"])
    # What floe-utilization.service publishes, for this group.
    assert (spec["namespace"], spec["metric_name"], spec["statistic"]) == \
        ("${local.utilization_namespace}", "AgentUtilization", "Average")
    dimension = one(spec["metric_dimension"])
    assert (dimension["name"], dimension["value"]) == ("AutoScalingGroupName", "${each.value.asg_name}")
    assert policy["for_each"] == "${local.agent_pools}"


def test_agent_pools_are_all_roles_or_produce_and_jobs_beside_fetch():
    pools = text(module_locals()["agent_pools"])
    assert 'roles = var.agent_fetch_pool == null ? "produce,fetch,jobs" : "produce,jobs"' in pools
    assert 'roles = "fetch"' in pools and 'kafka_target = "fetch"' in pools
    assert template("floe-agent.service.tftpl").count("--roles ${roles}") == 1
    assert templatefile_args()["floe-agent.service.tftpl"]["roles"] == "each.value.roles"
    # Behind one load balancer address a client cannot pick a fetch agent.
    conditions = [p["condition"] for p in launch_template_preconditions()]
    assert '${var.agent_fetch_pool == null || local.advertised_address != "load_balancer"}' in conditions
    # Resources that became per pool keep the single pool's state.
    moved = [b for doc in module_files(MODULE_DIR).values() for b in doc.get("moved", [])]
    pairs = {(m["from"], m["to"]) for m in moved}
    for address in ("aws_launch_template.agent", "aws_autoscaling_group.agent",
                    "aws_autoscaling_policy.agent_utilization", "aws_cloudwatch_metric_alarm.agent_cpu_high"):
        assert any(f == f"${{{address}}}" or f == address for f, _ in pairs), f"{address} not moved: {pairs}"


def test_fetch_agents_listen_for_peers_on_their_private_address_reachable_by_agents_only():
    unit = template("floe-agent.service.tftpl")
    # Over the metadata TLS identities; plaintext only where the metadata port is plaintext too.
    assert "%{ if peer_port != 0 } --peer-addr 0.0.0.0:${peer_port} " \
        "--peer-advertised-addr $${FLOE_PRIVATE_IP}:${peer_port}%{ if !metadata_mtls } --peer-allow-plaintext" \
        "%{ endif }%{ endif }" in unit
    assert templatefile_args()["floe-agent.service.tftpl"]["peer_port"] == \
        'strcontains(each.value.roles, "fetch") ? local.peer_port : 0'
    assert "FLOE_PRIVATE_IP=$ipv4" in template("prepare-agent.sh.tftpl")
    for rule in (resources_of("aws_vpc_security_group_ingress_rule")["agent_from_agents"],
                 resources_of("aws_vpc_security_group_egress_rule")["agent_to_agents"]):
        assert rule["from_port"] == rule["to_port"] == "${local.peer_port}"
        assert rule["security_group_id"] == rule["referenced_security_group_id"] == "${aws_security_group.agent.id}"
        assert "cidr_ipv4" not in rule


def test_alarms_cover_cpu_targets_and_metadata_status():
    alarms = resources_of("aws_cloudwatch_metric_alarm")
    metrics = {a["metric_name"] for a in alarms.values()}
    assert {"CPUUtilization", "UnHealthyHostCount", "HealthyHostCount", "StatusCheckFailed_System", "StatusCheckFailed_Instance"} <= metrics
    for name, alarm in alarms.items():
        assert "var.alarm_actions" in text(alarm["alarm_actions"]), name
        assert alarm.get("alarm_description"), name


# ---------------------------------------------------------------- tags


def test_every_taggable_resource_is_tagged():
    assert module_locals()["tags"] == '${merge(var.tags, {"floe:cluster" = var.name})}'
    checked = 0
    for rtype, name, body in resources():
        if rtype in UNTAGGABLE:
            continue
        checked += 1
        if rtype in TAGGED_BY_TAG_BLOCKS:
            dyn = [d["tag"] for d in all_blocks(body.get("dynamic")) if "tag" in d]
            assert dyn and "local.tags" in dyn[0]["for_each"], f"{rtype}.{name} has no tags"
            assert one(dyn[0]["content"])["propagate_at_launch"] is True
            continue
        assert "local.tags" in text(body.get("tags", "")), f"{rtype}.{name} is not tagged with local.tags"
    assert checked >= 20
    for name, body in resources_of("aws_launch_template").items():
        kinds = {one([s])["resource_type"]: s for s in all_blocks(body["tag_specifications"])}
        assert {"instance", "volume"} <= set(kinds), name
        for spec in kinds.values():
            assert "local.tags" in spec["tags"]


# ---------------------------------------------------------------- user data


def template(name: str) -> str:
    return (TEMPLATES_DIR / name).read_text()


def template_variables(source: str) -> set[str]:
    """Names a Terraform template interpolates (not escaped $${...}) or tests
    in a directive (%{ if ... }, not escaped %%{...})."""
    names = set()
    for m in re.finditer(r"(?<!\$)\$\{\s*([^}]*)\}", source):
        names.update(re.findall(r"\b([a-z_][a-z0-9_]*)\b(?!\s*\()", m.group(1)))
    for m in re.finditer(r"(?<!%)%\{~?\s*([^}]*?)\s*~?\}", source):
        expr = re.sub(r'"[^"]*"', '""', m.group(1))
        names.update(re.findall(r"\b([a-z_][a-z0-9_]*)\b(?!\s*\()", expr))
    return names - {"indent", "if", "else", "endif", "for", "in", "endfor", "true", "false", "null"}


def templatefile_args() -> dict[str, dict[str, str]]:
    """Template name -> {key: expression} the module passes to templatefile()."""
    calls: dict[str, dict[str, str]] = {}
    source = "\n".join(p.read_text() for p in MODULE_DIR.glob("*.tf"))
    for m in re.finditer(r'templatefile\("\$\{path\.module\}/templates/([\w.-]+)",\s*\{', source):
        depth, i = 1, m.end()
        while depth:
            depth += {"{": 1, "}": -1}.get(source[i], 0)
            i += 1
        body = source[m.end():i - 1]
        # Keys at the top level of this map only.
        args, depth = {}, 0
        for line in body.splitlines():
            if depth == 0 and (k := re.match(r"\s*(\w+)\s*=\s*(.*)$", line)):
                args[k.group(1)] = k.group(2).strip()
            depth += line.count("{") - line.count("}") + line.count("(") - line.count(")")
        calls.setdefault(m.group(1), {}).update(args)
    return calls


def templatefile_calls() -> dict[str, set[str]]:
    """Template name -> keys the module passes to templatefile() for it."""
    return {name: set(args) for name, args in templatefile_args().items()}


def test_templatefile_calls_pass_every_template_variable():
    calls = templatefile_calls()
    templates = {p.name for p in TEMPLATES_DIR.glob("*.tftpl")}
    assert set(calls) == templates, f"unused or missing templates: {templates ^ set(calls)}"
    for name in templates:
        used = template_variables(template(name))
        assert used <= calls[name], f"{name} uses {used - calls[name]} which the module never passes"


def test_units_run_floe_under_systemd_with_the_cli_shapes():
    agent = template("floe-agent.service.tftpl")
    metadata = template("floe-metadata.service.tftpl")
    for unit in (agent, metadata):
        for line in ("User=floe", "Group=floe", "Restart=always", "LimitNOFILE=1048576", "NoNewPrivileges=yes", "WantedBy=multi-user.target"):
            assert line in unit.splitlines(), line
    for flag in ("--metadata ${metadata_addrs}", "--kafka-addr 0.0.0.0:${kafka_port}",
                 "--advertised-addr $${FLOE_ADVERTISED_HOST}:${kafka_port}", "--http-addr 0.0.0.0:${http_port}",
                 "--object-store ${object_store_url}", "--cache-dir /var/cache/floe", "--zone $${FLOE_ZONE}"):
        assert flag in agent, flag
    for flag in ("metadata --node-id ${node_id}", "--metadata-addr ${fqdn}:${metadata_port}",
                 "--data-dir /var/lib/floe/metadata", "--peers ${peers}", "--object-store ${object_store_url}"):
        assert flag in metadata, flag
    assert "RequiresMountsFor=/var/lib/floe/metadata" in metadata


def test_the_module_hands_the_security_settings_to_the_agent():
    args = templatefile_args()
    unit, prepare = args["floe-agent.service.tftpl"], args["prepare-agent.sh.tftpl"]
    assert unit["allow_unauthenticated"] == "var.allow_unauthenticated"
    assert unit["sasl_enable_plain"] == "var.sasl_enable_plain"
    assert unit["tls_mode"] == "local.tls_mode"
    assert unit["operator_token"] == "var.operator_token_secret_arn != null"
    for name in ("max_connections", "max_connections_per_ip", "auth_failures_per_minute"):
        assert unit[name] == f"var.{name}", name
    assert prepare["advertised_address"] == "local.advertised_address"
    assert prepare["tls_secret_arn"] == 'local.tls_mode == "agent" ? var.tls_secret_arn : ""'
    assert prepare["operator_token_secret_arn"] == 'var.operator_token_secret_arn == null ? "" : var.operator_token_secret_arn'
    # The agents' one metadata identity, and its serial (a new one rolls the group).
    assert unit["metadata_mtls"] == "var.metadata_mtls"
    assert prepare["metadata_tls_secret_arn"] == \
        'var.metadata_mtls ? aws_secretsmanager_secret.metadata_tls["agent"].arn : ""'
    assert prepare["metadata_tls_serial"] == "local.metadata_tls_agent_serial"
    assert prepare["secret_functions"] == 'file("${path.module}/templates/secrets.sh")'


def test_the_module_hands_each_metadata_node_its_own_certificate():
    args = templatefile_args()
    unit, prepare = args["floe-metadata.service.tftpl"], args["prepare-metadata.sh.tftpl"]
    assert unit["metadata_mtls"] == "var.metadata_mtls"
    assert unit["operator_token"] == "var.operator_token_secret_arn != null"
    assert prepare["metadata_tls_secret_arn"] == \
        'var.metadata_mtls ? aws_secretsmanager_secret.metadata_tls["peer-${each.key}"].arn : ""'
    assert prepare["operator_token_secret_arn"] == 'var.operator_token_secret_arn == null ? "" : var.operator_token_secret_arn'
    assert prepare["secret_functions"] == 'file("${path.module}/templates/secrets.sh")'
    # Every peer certificate names the host its node is dialed at (--peers, --metadata).
    assert module_locals()["metadata_peers"] == \
        '${join(",", [for id, n in local.metadata_nodes : "${id}=${n.fqdn}:${local.metadata_port}"])}'
    assert "dns_names = [n.fqdn]" in module_locals()["metadata_tls_identities"]


def test_metadata_unit_runs_mutual_tls_or_says_plaintext():
    exec_start = next(line for line in template("floe-metadata.service.tftpl").splitlines() if line.startswith("ExecStart="))
    assert ("%{ if metadata_mtls } --metadata-tls-cert /etc/floe/metadata-tls/cert.pem"
            " --metadata-tls-key /etc/floe/metadata-tls/key.pem --metadata-tls-ca /etc/floe/metadata-tls/ca.pem"
            "%{ else } --metadata-allow-plaintext%{ endif }") in exec_start
    assert "%{ if operator_token } --operator-token-file /etc/floe/operator-token%{ endif }" in exec_start


def test_agent_unit_turns_on_sasl_api_keys_and_tls():
    agent = template("floe-agent.service.tftpl")
    exec_start = next(line for line in agent.splitlines() if line.startswith("ExecStart="))
    assert ("%{ if !allow_unauthenticated } --sasl-mechanisms SCRAM-SHA-512,SCRAM-SHA-256"
            "%{ if sasl_enable_plain },PLAIN%{ endif } --http-require-api-key%{ endif }") in exec_start
    assert '%{ if tls_mode == "agent" } --tls-cert /etc/floe/tls/cert.pem --tls-key /etc/floe/tls/key.pem%{ endif }' in exec_start
    assert "%{ if operator_token } --operator-token-file /etc/floe/operator-token%{ endif }" in exec_start
    assert ("%{ if metadata_mtls } --metadata-tls-cert /etc/floe/metadata-tls/cert.pem"
            " --metadata-tls-key /etc/floe/metadata-tls/key.pem --metadata-tls-ca /etc/floe/metadata-tls/ca.pem"
            "%{ endif }") in exec_start
    for flag in ("--node-id $${FLOE_NODE_ID}", "--max-connections ${max_connections}",
                 "--max-connections-per-ip ${max_connections_per_ip}",
                 "--auth-failures-per-minute ${auth_failures_per_minute}"):
        assert flag in exec_start, flag
    # Extra arguments come last, after every flag the module sets.
    assert exec_start.endswith("%{ endif }${extra_args}")


def cli_flags() -> set[str]:
    """Every long flag src/cli.rs declares (`#[arg(long ...)]` fields)."""
    flags = set()
    for m in re.finditer(r"#\[arg\(([^\n]*)\)\]\s*\n\s*pub\(crate\) (\w+):|#\[arg\(([^\n]*)\)\]\s*\n\s*(\w+):",
                         CLI_RS.read_text()):
        attrs, field = (m.group(1), m.group(2)) if m.group(2) else (m.group(3), m.group(4))
        if not re.search(r"\blong\b", attrs):
            continue
        named = re.search(r'long\s*=\s*"([\w-]+)"', attrs)
        flags.add("--" + (named.group(1) if named else field.replace("_", "-")))
    return flags


def test_units_use_only_flags_the_cli_has():
    flags = cli_flags()
    assert {"--tls-cert", "--tls-key", "--sasl-mechanisms", "--http-require-api-key", "--operator-token-file",
            "--max-connections-per-ip", "--node-id", "--peers", "--metadata-tls-cert", "--metadata-tls-key",
            "--metadata-tls-ca", "--metadata-allow-plaintext"} <= flags, flags
    for name in ("floe-agent.service.tftpl", "floe-metadata.service.tftpl"):
        exec_start = next(line for line in template(name).splitlines() if line.startswith("ExecStart="))
        used = set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", exec_start))
        assert used, name
        assert used <= flags, f"{name} uses flags src/cli.rs does not have: {used - flags}"


def test_agent_reads_its_zone_with_imdsv2():
    prepare = template("prepare-agent.sh.tftpl")
    assert "X-aws-ec2-metadata-token-ttl-seconds" in prepare and "-X PUT" in prepare
    assert "X-aws-ec2-metadata-token: $token" in prepare
    assert "placement/availability-zone" in prepare and "FLOE_ZONE=$zone" in prepare


def test_install_verifies_sha256_and_supports_url_and_s3():
    install = template("install-floe.sh.tftpl")
    assert "sha256sum --check" in install
    assert "aws s3 cp" in install and "--proto '=https'" in install
    assert "set -euo pipefail" in install


# ---------------------------------------------------------------- rendering


TLS_SECRET = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:floe/tls-AbCdEf"
TOKEN_SECRET = "arn:aws:secretsmanager:eu-central-1:123456789012:secret:floe/operator-ZyXwVu"
AGENT_MTLS_SECRET = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:floe/metadata-tls/agent-20261202-QwErTy"
PEER_MTLS_SECRET = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:floe/metadata-tls/peer-2-20261202-AsDfGh"


class Hcl(str):
    """An HCL expression to pass as it is, not as a string literal."""


SECRET_FUNCTIONS = Hcl(f'file("{TEMPLATES_DIR / "secrets.sh"}")')

RENDER_VALUES = {
    "install-floe.sh.tftpl": {"binary_source": "s3://artifacts/floe/floe", "binary_sha256": "ab" * 32, "region": "eu-west-1"},
    "prepare-agent.sh.tftpl": {"advertised_address": "private_ip", "advertised_host": "", "region": "eu-west-1",
                               "tls_secret_arn": TLS_SECRET, "operator_token_secret_arn": TOKEN_SECRET,
                               "metadata_tls_secret_arn": AGENT_MTLS_SECRET, "metadata_tls_serial": "1234567890",
                               "secret_functions": SECRET_FUNCTIONS},
    "prepare-metadata.sh.tftpl": {"node_id": "2", "fqdn": "floe-metadata-2.floe.internal", "volume_id": "vol-0123456789abcdef0",
                                  "volume_serial": "vol0123456789abcdef0", "region": "eu-west-1",
                                  "metadata_tls_secret_arn": PEER_MTLS_SECRET, "operator_token_secret_arn": TOKEN_SECRET,
                                  "secret_functions": SECRET_FUNCTIONS},
    "floe-agent.service.tftpl": {"metadata_addrs": "m1:9093,m2:9093,m3:9093", "kafka_port": 9092, "http_port": 8080,
                                 "object_store_url": "s3://b/floe", "allow_unauthenticated": False,
                                 "sasl_enable_plain": False, "tls_mode": "agent", "operator_token": True,
                                 "metadata_mtls": True, "max_connections": 10000, "max_connections_per_ip": 1000,
                                 "auth_failures_per_minute": 10, "autoscale_cpu_target": 0.6,
                                 "roles": "produce,fetch,jobs", "peer_port": 9096, "extra_args": " --flush-interval-ms 100"},
    "publish-utilization.sh.tftpl": {"metrics_url": "https://127.0.0.1:8080/metrics", "region": "eu-west-1",
                                     "namespace": "Floe", "asg_name": "floe-agent"},
    "floe-utilization.service.tftpl": {"region": "eu-west-1"},
    "floe-metadata.service.tftpl": {"node_id": "2", "fqdn": "floe-metadata-2.floe.internal", "metadata_port": 9093,
                                    "metrics_port": 9094,
                                    "peers": "1=m1:9093,2=m2:9093,3=m3:9093", "object_store_url": "s3://b/floe",
                                    "metadata_mtls": True, "operator_token": True},
}

# The agent's templates once per security mode, with what the module passes
# in that mode (see test_the_module_hands_the_security_settings_to_the_agent).
AGENT_MODES = {
    # tls_secret_arn and operator_token_secret_arn: the agent terminates TLS.
    "agent-tls": ({}, {}),
    # tls_certificate_arn: the NLB terminates TLS, agents advertise it.
    "nlb-tls": ({"tls_mode": "nlb", "operator_token": False},
                {"advertised_address": "load_balancer", "advertised_host": "kafka.example.com",
                 "tls_secret_arn": "", "operator_token_secret_arn": ""}),
    # sasl_enable_plain with TLS.
    "plain": ({"sasl_enable_plain": True, "operator_token": False},
              {"operator_token_secret_arn": ""}),
    # allow_unauthenticated = true, no TLS variable.
    "unauthenticated": ({"allow_unauthenticated": True, "tls_mode": "none", "operator_token": False,
                         "max_connections_per_ip": 50},
                        {"tls_secret_arn": "", "operator_token_secret_arn": ""}),
    # metadata_mtls = false (with tls_certificate_arn): no secret at all.
    "no-metadata-mtls": ({"tls_mode": "nlb", "operator_token": False, "metadata_mtls": False},
                         {"advertised_address": "load_balancer", "advertised_host": "kafka.example.com",
                          "tls_secret_arn": "", "operator_token_secret_arn": "", "metadata_tls_secret_arn": "",
                          "metadata_tls_serial": ""}),
}

# The metadata node's unit: by default, with metadata_mtls = false, and without
# an operator token.
METADATA_MODES = {
    "mtls": {},
    "plaintext": {"metadata_mtls": False},
    "no-token": {"operator_token": False},
}


def _hcl(value) -> str:
    if isinstance(value, Hcl):
        return str(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    return json.dumps(value)


def _hcl_object(values: dict) -> str:
    return "{" + ", ".join(f"{k} = {_hcl(v)}" for k, v in values.items()) + "}"


@functools.cache
def rendered(tmp_root: Path) -> dict[str, str]:
    """Renders each template and both cloud-init documents with Terraform."""
    def call(name, values):
        return f'templatefile("{TEMPLATES_DIR / name}", {values})'

    outputs = {name: call(name, _hcl_object(v)) for name, v in RENDER_VALUES.items()}
    for mode, (unit, prepare) in AGENT_MODES.items():
        outputs[f"agent-unit-{mode}"] = call("floe-agent.service.tftpl",
                                             _hcl_object({**RENDER_VALUES["floe-agent.service.tftpl"], **unit}))
        outputs[f"agent-prepare-{mode}"] = call("prepare-agent.sh.tftpl",
                                                _hcl_object({**RENDER_VALUES["prepare-agent.sh.tftpl"], **prepare}))
    for mode, unit in METADATA_MODES.items():
        outputs[f"metadata-unit-{mode}"] = call("floe-metadata.service.tftpl",
                                                _hcl_object({**RENDER_VALUES["floe-metadata.service.tftpl"], **unit}))
    outputs["metadata-prepare-plaintext"] = call("prepare-metadata.sh.tftpl", _hcl_object(
        {**RENDER_VALUES["prepare-metadata.sh.tftpl"], "metadata_tls_secret_arn": "", "operator_token_secret_arn": ""}))
    for role, prepare, unit in (("agent", "prepare-agent.sh.tftpl", "floe-agent.service.tftpl"),
                                ("metadata", "prepare-metadata.sh.tftpl", "floe-metadata.service.tftpl")):
        publisher = (outputs["publish-utilization.sh.tftpl"], outputs["floe-utilization.service.tftpl"]) \
            if role == "agent" else ('""', '""')
        outputs[f"cloud-init-{role}"] = call("cloud-init.yaml.tftpl", "{" + ", ".join([
            f'role = "{role}"', f'unit_name = "floe-{role}.service"',
            f'install_script = {outputs["install-floe.sh.tftpl"]}',
            f"prepare_script = {outputs[prepare]}", f"unit = {outputs[unit]}",
            f"publisher_script = {publisher[0]}", f"publisher_unit = {publisher[1]}"]) + "}")
    root = tmp_root / "render"
    root.mkdir()
    (root / "main.tf").write_text("\n".join(
        f'output "{re.sub(r"[^a-z0-9]", "_", name)}" {{\n  value = {expr}\n}}' for name, expr in outputs.items()))
    env_args = {"cwd": root, "capture_output": True, "text": True, "timeout": 120}
    for args in (["init", "-input=false", "-no-color"], ["apply", "-auto-approve", "-input=false", "-no-color"]):
        run = subprocess.run(["terraform", *args], **env_args)
        assert run.returncode == 0, run.stdout + run.stderr
    run = subprocess.run(["terraform", "output", "-json", "-no-color"], **env_args)
    assert run.returncode == 0, run.stderr
    values = json.loads(run.stdout)
    return {name: values[re.sub(r"[^a-z0-9]", "_", name)]["value"] for name in outputs}


@pytest.fixture(scope="module")
def renders(tmp_path_factory):
    if shutil.which("terraform") is None:
        pytest.skip("no terraform binary: templates not rendered")
    return rendered(tmp_path_factory.mktemp("tf"))


@pytest.mark.parametrize("role", ["agent", "metadata"])
def test_cloud_init_renders_to_valid_yaml_and_shell(renders, role, tmp_path):
    import yaml

    source = renders[f"cloud-init-{role}"]
    assert source.startswith("#cloud-config\n")
    doc = yaml.safe_load(source)
    files = {f["path"]: f for f in doc["write_files"]}
    scripts = ["/usr/local/sbin/floe-install", "/usr/local/sbin/floe-prepare"]
    publisher = ["/usr/local/sbin/floe-publish-utilization", "/etc/systemd/system/floe-utilization.service"]
    assert set(files) == {*scripts, f"/etc/systemd/system/floe-{role}.service", *(publisher if role == "agent" else [])}
    if role == "agent":
        scripts.append("/usr/local/sbin/floe-publish-utilization")
        assert "systemctl enable --now floe-utilization.service" in doc["runcmd"][0][2]
    for path in scripts:
        script = files[path]["content"]
        assert script.startswith("#!/bin/bash\n"), path
        target = tmp_path / Path(path).name
        target.write_text(script)
        check = subprocess.run(["bash", "-n", str(target)], capture_output=True, text=True)
        assert check.returncode == 0, f"{path}: {check.stderr}"
    unit = files[f"/etc/systemd/system/floe-{role}.service"]["content"]
    exec_start = next(line for line in unit.splitlines() if line.startswith("ExecStart="))
    for env in ("${FLOE_ZONE}", "${FLOE_ADVERTISED_HOST}", "${FLOE_NODE_ID}", "${FLOE_PRIVATE_IP}"):
        exec_start = exec_start.replace(env, "")
    assert "${" not in exec_start and "%{" not in exec_start
    assert " --metadata-tls-cert /etc/floe/metadata-tls/cert.pem" in exec_start
    if role == "agent":
        assert exec_start.endswith(" --flush-interval-ms 100")
    else:
        assert "--peers 1=m1:9093,2=m2:9093,3=m3:9093" in exec_start
    runcmd = doc["runcmd"][0]
    assert runcmd[:2] == ["sh", "-ec"] and f"systemctl enable --now floe-{role}.service" in runcmd[2]
    # No secret ever travels in the user data: only the ARNs of the secrets.
    assert "BEGIN" not in source.replace("-----BEGIN ", "")
    assert len(source.encode()) < 16 * 1024, "EC2 user data is limited to 16 KiB"


def test_rendered_install_script_checks_the_configured_hash(renders):
    script = renders["install-floe.sh.tftpl"]
    assert f"want_sha256='{'ab' * 32}'" in script
    assert "source_uri='s3://artifacts/floe/floe'" in script


def agent_args(renders, mode: str) -> list[str]:
    unit = renders[f"agent-unit-{mode}"]
    exec_start = next(line for line in unit.splitlines() if line.startswith("ExecStart="))
    return exec_start.removeprefix("ExecStart=").split()


def flag_value(args: list[str], flag: str) -> str:
    assert args.count(flag) == 1, (flag, args)
    return args[args.index(flag) + 1]


@pytest.mark.parametrize("mode", list(AGENT_MODES))
def test_agent_start_command_in_each_security_mode(renders, mode):
    args = agent_args(renders, mode)
    assert args[:2] == ["/usr/local/bin/floe", "agent"]
    # Every flag once, each followed by its value (--http-require-api-key and
    # --peer-allow-plaintext take none).
    flags, i = [], 2
    while i < len(args):
        assert args[i].startswith("--"), (args[i], args)
        flags.append(args[i])
        i += 1 if args[i] in ("--http-require-api-key", "--peer-allow-plaintext") else 2
    assert i == len(args) and len(flags) == len(set(flags)), args
    assert flag_value(args, "--node-id") == "${FLOE_NODE_ID}"
    assert flag_value(args, "--max-connections") == "10000"
    assert flag_value(args, "--max-connections-per-ip") == ("50" if mode == "unauthenticated" else "1000")
    assert flag_value(args, "--auth-failures-per-minute") == "10"
    if mode == "unauthenticated":
        for flag in ("--sasl-mechanisms", "--http-require-api-key", "--tls-cert", "--tls-key", "--operator-token-file"):
            assert flag not in args, (mode, flag)
    else:
        expected = "SCRAM-SHA-512,SCRAM-SHA-256,PLAIN" if mode == "plain" else "SCRAM-SHA-512,SCRAM-SHA-256"
        assert flag_value(args, "--sasl-mechanisms") == expected
        assert args.count("--http-require-api-key") == 1
    if mode in ("agent-tls", "plain"):
        assert flag_value(args, "--tls-cert") == "/etc/floe/tls/cert.pem"
        assert flag_value(args, "--tls-key") == "/etc/floe/tls/key.pem"
    else:
        # The NLB terminates TLS (nlb-tls), or there is none (unauthenticated).
        assert "--tls-cert" not in args and "--tls-key" not in args
    # The metadata port's client certificate, in every mode but metadata_mtls = false.
    metadata_tls = {"--metadata-tls-cert": "/etc/floe/metadata-tls/cert.pem",
                    "--metadata-tls-key": "/etc/floe/metadata-tls/key.pem",
                    "--metadata-tls-ca": "/etc/floe/metadata-tls/ca.pem"}
    for flag, path in metadata_tls.items():
        if mode == "no-metadata-mtls":
            assert flag not in args, (mode, flag)
        else:
            assert flag_value(args, flag) == path, (mode, flag)
    # The peer listener uses the same identities; plaintext only where they are off.
    assert ("--peer-allow-plaintext" in args) == (mode == "no-metadata-mtls"), (mode, args)
    if mode == "agent-tls":
        assert flag_value(args, "--operator-token-file") == "/etc/floe/operator-token"
    else:
        assert "--operator-token-file" not in args
    assert args[-2:] == ["--flush-interval-ms", "100"]


@pytest.mark.parametrize("mode", list(METADATA_MODES))
def test_metadata_start_command_has_the_tls_flags_or_the_plaintext_flag(renders, mode):
    unit = renders[f"metadata-unit-{mode}"]
    exec_start = next(line for line in unit.splitlines() if line.startswith("ExecStart="))
    args = exec_start.removeprefix("ExecStart=").split()
    assert args[:2] == ["/usr/local/bin/floe", "metadata"]
    flags, i = [], 2
    while i < len(args):
        assert args[i].startswith("--"), (args[i], args)
        flags.append(args[i])
        i += 1 if args[i] == "--metadata-allow-plaintext" else 2
    assert i == len(args) and len(flags) == len(set(flags)), args
    assert flag_value(args, "--metadata-addr") == "floe-metadata-2.floe.internal:9093"
    tls = ("--metadata-tls-cert", "--metadata-tls-key", "--metadata-tls-ca")
    if mode == "plaintext":
        assert "--metadata-allow-plaintext" in args
        for flag in tls:
            assert flag not in args, flag
    else:
        assert "--metadata-allow-plaintext" not in args
        for flag, name in zip(tls, ("cert", "key", "ca")):
            assert flag_value(args, flag) == f"/etc/floe/metadata-tls/{name}.pem"
    if mode == "no-token":
        assert "--operator-token-file" not in args
    else:
        assert flag_value(args, "--operator-token-file") == "/etc/floe/operator-token"


# ---------------------------------------------------------------- preconditions, planned


ACM_ARN = "arn:aws:acm:eu-west-1:123456789012:certificate/0a1b2c3d-0a1b-0a1b-0a1b-0a1b2c3d4e5f"

REQUIRED_VARS = {
    "vpc_id": "vpc-0123456789abcdef0",
    "agent_subnet_ids": ["subnet-0aaaaaaaaaaaaaaaa", "subnet-0bbbbbbbbbbbbbbbb"],
    "metadata_subnet_ids": ["subnet-0aaaaaaaaaaaaaaaa", "subnet-0bbbbbbbbbbbbbbbb", "subnet-0cccccccccccccccc"],
    "route_table_ids": ["rtb-0aaaaaaaaaaaaaaaa"],
    "client_cidr_blocks": ["10.0.0.0/16"],
    "floe_binary_source": "https://example.com/floe",
}


def block_source(source: str, start: str) -> str:
    """The text of the block that opens at `start` (up to its closing brace)."""
    i = source.index(start)
    j = source.index("{", i) + 1
    depth = 1
    while depth:
        depth += {"{": 1, "}": -1}.get(source[j], 0)
        j += 1
    return source[i:j]


@pytest.fixture(scope="module")
def precondition_root(tmp_path_factory):
    """The module's variables.tf and its agent launch template's preconditions
    (on a provider-free terraform_data resource), so `terraform plan` runs
    them exactly as written."""
    if shutil.which("terraform") is None:
        pytest.skip("no terraform binary: preconditions not planned")
    root = tmp_path_factory.mktemp("preconditions")
    shutil.copy(MODULE_DIR / "variables.tf", root / "variables.tf")
    agents = (MODULE_DIR / "agents.tf").read_text()
    launch_template = block_source(agents, 'resource "aws_launch_template" "agent"')
    lifecycle = block_source(launch_template, "lifecycle {")
    names = set(re.findall(r"local\.(\w+)", lifecycle))
    assert names <= {"tls_mode", "advertised_address"}, names
    locals_ = "\n".join(f"  {n} = {module_locals()[n][2:-1]}" for n in ("tls_mode", "advertised_address"))
    (root / "main.tf").write_text(f'locals {{\n{locals_}\n}}\n\nresource "terraform_data" "agent" {{\n  {lifecycle}\n}}\n')
    (root / "required.tfvars.json").write_text(json.dumps(REQUIRED_VARS))
    run = subprocess.run(["terraform", "init", "-input=false", "-no-color"], cwd=root, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    return root


@pytest.mark.parametrize("variables, refused", [
    ({}, "Floe needs TLS"),
    ({"allow_unauthenticated": True}, None),
    ({"tls_secret_arn": TLS_SECRET}, None),
    ({"tls_secret_arn": TLS_SECRET, "operator_token_secret_arn": TOKEN_SECRET, "sasl_enable_plain": True}, None),
    ({"tls_certificate_arn": ACM_ARN, "client_endpoint_dns_name": "kafka.example.com"}, None),
    ({"tls_certificate_arn": ACM_ARN}, "needs client_endpoint_dns_name"),
    ({"tls_certificate_arn": ACM_ARN, "client_endpoint_dns_name": "kafka.example.com",
      "agent_advertised_address": "private_ip"}, "must be load_balancer"),
    ({"tls_certificate_arn": ACM_ARN, "tls_secret_arn": TLS_SECRET, "client_endpoint_dns_name": "kafka.example.com"},
     "not both"),
    ({"allow_unauthenticated": True, "sasl_enable_plain": True}, "sasl_enable_plain"),
    ({"allow_unauthenticated": True, "operator_token_secret_arn": TOKEN_SECRET}, "operator_token_secret_arn"),
], ids=["nothing", "unauthenticated", "secret", "secret-plain-token", "acm", "acm-without-name",
        "acm-advertising-agents", "both", "plain-unauthenticated", "token-without-tls"])
def test_plan_preconditions(precondition_root, variables, refused):
    (precondition_root / "case.tfvars.json").write_text(json.dumps(variables))
    run = subprocess.run(["terraform", "plan", "-input=false", "-no-color", "-refresh=false", "-lock=false",
                          "-var-file=required.tfvars.json", "-var-file=case.tfvars.json"],
                         cwd=precondition_root, capture_output=True, text=True, timeout=120)
    output = " ".join((run.stdout + run.stderr).split())
    if refused is None:
        assert run.returncode == 0, output
    else:
        assert run.returncode != 0 and "Resource precondition failed" in output, output
        assert refused in output, output


# ---------------------------------------------------------------- the agent's prepare script, run


STUB_CURL = r"""#!/bin/bash
# IMDSv2: a PUT for the token, then GETs of meta-data paths.
for a in "$@"; do url=$a; done
case "$*" in
  *"-X PUT"*) echo "imds-token" ;;
  *) path=${url#http://169.254.169.254/latest/meta-data/}
     case "$path" in
       placement/availability-zone) echo "eu-west-1b" ;;
       local-ipv4) echo "10.1.2.3" ;;
       local-hostname) echo "ip-10-1-2-3.eu-west-1.compute.internal" ;;
       *) exit 22 ;;
     esac ;;
esac
"""

STUB_AWS = r"""#!/usr/bin/env python3
# `aws secretsmanager get-secret-value --region R --secret-id ARN --query SecretString --output text`
import json, os, sys
args = sys.argv[1:]
with open(os.environ["STUB_LOG"], "a") as log:
    log.write(" ".join(args) + "\n")
assert args[:2] == ["secretsmanager", "get-secret-value"], args
opt = {args[i]: args[i + 1] for i in range(2, len(args) - 1, 2)}
assert opt["--query"] == "SecretString" and opt["--output"] == "text", args
arn = opt["--secret-id"]
assert opt["--region"] == arn.split(":")[3], "read a secret in another region than its own"
secrets = json.load(open(os.environ["STUB_SECRETS"]))
if arn not in secrets:
    sys.exit("An error occurred (AccessDeniedException)")
print(secrets[arn])
"""

# install(1) without -o/-g (no floe user here); chown and sleep do nothing.
STUB_INSTALL = r"""#!/bin/bash
args=()
while [ $# -gt 0 ]; do
  case "$1" in -o|-g) shift 2 ;; *) args+=("$1"); shift ;; esac
done
exec /usr/bin/install "${args[@]}"
"""
STUB_CHOWN = '#!/bin/bash\necho "chown $*" >>"$STUB_LOG"\n'
STUB_SLEEP = "#!/bin/bash\nexit 0\n"

CERT_PEM = "-----BEGIN CERTIFICATE-----\nMIIBfake\n-----END CERTIFICATE-----\n"
KEY_PEM = "-----BEGIN PRIVATE KEY-----\nMIGHfake\n-----END PRIVATE KEY-----\n"
TOKEN = "op-" + "x" * 40


def run_prepare(script: str, tmp_path: Path, secrets: dict[str, str]) -> tuple[subprocess.CompletedProcess, Path, str]:
    """Runs the rendered prepare script with its absolute paths moved under
    tmp_path and curl, aws, install, chown and sleep stubbed."""
    root = tmp_path / "root"
    (root / "etc").mkdir(parents=True)
    (root / "var" / "cache").mkdir(parents=True)
    script = script.replace("/etc/floe", f"{root}/etc/floe").replace("/var/cache/floe", f"{root}/var/cache/floe")
    assert "/etc/floe" not in script.replace(f"{root}/etc/floe", "")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, body in (("curl", STUB_CURL), ("aws", STUB_AWS), ("install", STUB_INSTALL),
                       ("chown", STUB_CHOWN), ("sleep", STUB_SLEEP)):
        (bin_dir / name).write_text(body)
        (bin_dir / name).chmod(0o755)
    (tmp_path / "prepare.sh").write_text(script)
    (tmp_path / "secrets.json").write_text(json.dumps(secrets))
    log = tmp_path / "stub.log"
    log.write_text("")
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "STUB_LOG": str(log),
           "STUB_SECRETS": str(tmp_path / "secrets.json")}
    run = subprocess.run(["bash", str(tmp_path / "prepare.sh")], capture_output=True, text=True, env=env, timeout=60)
    return run, root / "etc" / "floe", log.read_text()


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def env_file(etc: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in (etc / "floe.env").read_text().splitlines())


CA_PEM = "-----BEGIN CERTIFICATE-----\nMIIBca\n-----END CERTIFICATE-----\n"
MTLS_BUNDLE = json.dumps({"cert": CERT_PEM, "key": KEY_PEM, "ca": CA_PEM})
AGENT_SECRETS = {TLS_SECRET: json.dumps({"cert": CERT_PEM, "key": KEY_PEM}), TOKEN_SECRET: TOKEN + "\n",
                 AGENT_MTLS_SECRET: MTLS_BUNDLE}


def test_prepare_writes_the_tls_files_and_token_mode_0600(renders, tmp_path):
    run, etc, log = run_prepare(renders["agent-prepare-agent-tls"], tmp_path, AGENT_SECRETS)
    assert run.returncode == 0, run.stdout + run.stderr
    env = env_file(etc)
    assert env["FLOE_ZONE"] == "eu-west-1b"
    assert env["FLOE_ADVERTISED_HOST"] == "10.1.2.3"
    assert env["FLOE_NODE_ID"] == str((10 << 24 | 1 << 16 | 2 << 8 | 3) & 0x7FFFFFFF)
    assert (etc / "tls" / "cert.pem").read_text() == CERT_PEM
    assert (etc / "tls" / "key.pem").read_text() == KEY_PEM
    assert (etc / "operator-token").read_text() == TOKEN + "\n"
    # The metadata port's client certificate, its key and the CA.
    mtls = etc / "metadata-tls"
    assert (mtls / "cert.pem").read_text() == CERT_PEM
    assert (mtls / "key.pem").read_text() == KEY_PEM
    assert (mtls / "ca.pem").read_text() == CA_PEM
    for path in (etc / "tls" / "cert.pem", etc / "tls" / "key.pem", etc / "operator-token",
                 mtls / "cert.pem", mtls / "key.pem", mtls / "ca.pem"):
        assert mode_of(path) == 0o600, path
    assert mode_of(etc / "tls") == 0o700 and mode_of(mtls) == 0o700
    assert not list((etc / "tls").glob("*.new")) and not list(mtls.glob("*.new"))
    assert f"chown floe:floe {etc}/tls/cert.pem {etc}/tls/key.pem" in log
    assert f"chown floe:floe {mtls}/cert.pem {mtls}/key.pem {mtls}/ca.pem" in log
    # Each secret read once, in its own region; no secret value in the output.
    assert log.count("get-secret-value") == 3
    assert "MIGHfake" not in run.stdout + run.stderr and TOKEN not in run.stdout + run.stderr


def test_prepare_advertises_the_load_balancer_and_reads_only_the_metadata_certificate(renders, tmp_path):
    run, etc, log = run_prepare(renders["agent-prepare-nlb-tls"], tmp_path, {AGENT_MTLS_SECRET: MTLS_BUNDLE})
    assert run.returncode == 0, run.stdout + run.stderr
    env = env_file(etc)
    assert env["FLOE_ADVERTISED_HOST"] == "kafka.example.com"
    assert env["FLOE_NODE_ID"] == str((10 << 24 | 1 << 16 | 2 << 8 | 3) & 0x7FFFFFFF)
    assert log.count("get-secret-value") == 1 and AGENT_MTLS_SECRET in log
    assert not (etc / "tls").exists() and not (etc / "operator-token").exists()
    assert (etc / "metadata-tls" / "ca.pem").read_text() == CA_PEM


def test_prepare_without_metadata_mtls_reads_no_secret(renders, tmp_path):
    run, etc, log = run_prepare(renders["agent-prepare-no-metadata-mtls"], tmp_path, {})
    assert run.returncode == 0, run.stdout + run.stderr
    assert "get-secret-value" not in log
    assert not (etc / "tls").exists() and not (etc / "metadata-tls").exists() and not (etc / "operator-token").exists()


@pytest.mark.parametrize("bad", [
    "not json",
    json.dumps({"cert": CERT_PEM}),
    json.dumps({"cert": CERT_PEM, "key": "no pem here"}),
    json.dumps({"cert": KEY_PEM, "key": KEY_PEM}),
    json.dumps([CERT_PEM, KEY_PEM]),
], ids=["not-json", "no-key", "key-not-pem", "cert-not-a-certificate", "not-an-object"])
def test_prepare_refuses_a_malformed_tls_secret(renders, tmp_path, bad):
    run, etc, _ = run_prepare(renders["agent-prepare-agent-tls"], tmp_path, {**AGENT_SECRETS, TLS_SECRET: bad})
    assert run.returncode != 0
    # Nothing half-written: the secret is checked whole before any file.
    assert not (etc / "tls" / "key.pem").exists() and not (etc / "tls" / "cert.pem").exists()
    assert "MIGHfake" not in run.stdout + run.stderr


@pytest.mark.parametrize("bad", [
    json.dumps({"cert": CERT_PEM, "key": KEY_PEM}),
    json.dumps({"cert": CERT_PEM, "key": KEY_PEM, "ca": KEY_PEM}),
], ids=["no-ca", "ca-not-a-certificate"])
def test_prepare_refuses_a_malformed_metadata_tls_secret(renders, tmp_path, bad):
    run, etc, _ = run_prepare(renders["agent-prepare-agent-tls"], tmp_path, {**AGENT_SECRETS, AGENT_MTLS_SECRET: bad})
    assert run.returncode != 0
    assert f"secret {AGENT_MTLS_SECRET} needs a PEM \"ca\" field" in run.stderr
    assert not list((etc / "metadata-tls").glob("*.pem"))
    assert "MIGHfake" not in run.stdout + run.stderr


def test_prepare_fails_when_a_secret_cannot_be_read_or_the_token_is_short(renders, tmp_path):
    unreadable, _, log = run_prepare(renders["agent-prepare-agent-tls"], tmp_path / "a", {})
    assert unreadable.returncode != 0 and "cannot read secret" in unreadable.stderr
    assert log.count("get-secret-value") == 6, "retried, then gave up"
    short, etc, _ = run_prepare(renders["agent-prepare-agent-tls"], tmp_path / "b", {**AGENT_SECRETS, TOKEN_SECRET: "short"})
    assert short.returncode != 0 and "shorter than 24" in short.stderr
    assert not (etc / "operator-token").exists()


def metadata_secrets_section(script: str) -> str:
    """The secrets part of the metadata node's prepare script, alone: the rest
    needs a block device, blkid and mount."""
    start = script.index("# ---------------------------------------------------------------- secrets")
    end = script.index("umask 022\n", start) + len("umask 022\n")
    return "#!/bin/bash\nset -euo pipefail\n" + script[start:end]


def test_metadata_prepare_writes_its_certificate_and_the_token_mode_0600(renders, tmp_path):
    script = renders["prepare-metadata.sh.tftpl"]
    # The secrets come before the wait for the node's name, which ends the script.
    assert script.index("# ---------------------------------------------------------------- secrets") < \
        script.index("getent hosts")
    run, etc, log = run_prepare(metadata_secrets_section(script), tmp_path,
                                {PEER_MTLS_SECRET: MTLS_BUNDLE, TOKEN_SECRET: TOKEN})
    assert run.returncode == 0, run.stdout + run.stderr
    mtls = etc / "metadata-tls"
    for name, pem in (("cert", CERT_PEM), ("key", KEY_PEM), ("ca", CA_PEM)):
        assert (mtls / f"{name}.pem").read_text() == pem
        assert mode_of(mtls / f"{name}.pem") == 0o600
    assert mode_of(mtls) == 0o700
    assert (etc / "operator-token").read_text() == TOKEN + "\n" and mode_of(etc / "operator-token") == 0o600
    assert f"chown floe:floe {mtls}/cert.pem {mtls}/key.pem {mtls}/ca.pem" in log
    assert log.count("get-secret-value") == 2
    assert "MIGHfake" not in run.stdout + run.stderr and TOKEN not in run.stdout + run.stderr


def test_metadata_prepare_in_plaintext_reads_no_secret(renders, tmp_path):
    run, etc, log = run_prepare(metadata_secrets_section(renders["metadata-prepare-plaintext"]), tmp_path, {})
    assert run.returncode == 0, run.stdout + run.stderr
    assert "get-secret-value" not in log
    assert not (etc / "metadata-tls").exists() and not (etc / "operator-token").exists()


# ---------------------------------------------------------------- metadata identities and secrets, evaluated


def module_expression(name: str) -> str:
    """A module local's expression, as Terraform source: the expression of a
    lone interpolation, else the string template itself."""
    value = module_locals()[name]
    assert isinstance(value, str), (name, value)
    if value.startswith("${"):
        depth, i = 1, 2
        while depth:
            depth += {"{": 1, "}": -1}.get(value[i], 0)
            i += 1
        if i == len(value):
            return value[2:-1]
    assert '"' not in value, (name, value)
    return f'"{value}"'


@pytest.fixture(scope="module")
def identity_root(tmp_path_factory):
    """The module's variables and the locals that name the metadata identities
    and each role's secrets, exactly as written, over three stand-in metadata
    nodes and stand-in ARNs for the module's own secrets."""
    if shutil.which("terraform") is None:
        pytest.skip("no terraform binary: locals not evaluated")
    root = tmp_path_factory.mktemp("identities")
    shutil.copy(MODULE_DIR / "variables.tf", root / "variables.tf")
    names = ("metadata_trust_domain", "metadata_tls_identities", "agent_secret_arns", "metadata_secret_arns",
             "agent_secret_regions", "metadata_secret_regions")
    exprs = {n: module_expression(n).replace("aws_secretsmanager_secret.metadata_tls", "local.stand_in_secrets")
             for n in names}
    for n, e in exprs.items():
        unknown = set(re.findall(r"\b(?:aws|data|tls)_\w+\.\w+", e))
        assert not unknown, f"{n} names {unknown}: stand it in here"
    (root / "main.tf").write_text("locals {\n" + "\n".join([
        '  region = "eu-west-1"',
        '  metadata_nodes = { for i in [1, 2, 3] : tostring(i) => { fqdn = "${var.name}-metadata-${i}.${var.dns_zone_name}" } }',
        '  stand_in_secrets = { for k, v in local.metadata_tls_identities : k => '
        '{ arn = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:${var.name}/metadata-tls/${k}-AbCdEf" } }',
        *[f"  {n} = {e}" for n, e in exprs.items()],
    ]) + "\n}\n\noutput \"all\" {\n  value = {\n" + "\n".join(f"    {n} = local.{n}" for n in names) + "\n  }\n}\n")
    (root / "required.tfvars.json").write_text(json.dumps(REQUIRED_VARS))
    run = subprocess.run(["terraform", "init", "-input=false", "-no-color"], cwd=root, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    return root


def evaluate(root: Path, variables: dict) -> dict:
    (root / "case.tfvars.json").write_text(json.dumps(variables))
    run = subprocess.run(["terraform", "apply", "-auto-approve", "-input=false", "-no-color", "-lock=false",
                          "-var-file=required.tfvars.json", "-var-file=case.tfvars.json"],
                         cwd=root, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    run = subprocess.run(["terraform", "output", "-json", "all"], cwd=root, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


def stand_in(identity: str) -> str:
    return f"arn:aws:secretsmanager:eu-west-1:123456789012:secret:floe/metadata-tls/{identity}-AbCdEf"


def test_metadata_identities_are_spiffe_ids_of_the_cluster(identity_root):
    got = evaluate(identity_root, {})
    assert got["metadata_trust_domain"] == "floe.floe.internal"
    ids = got["metadata_tls_identities"]
    assert set(ids) == {"peer-1", "peer-2", "peer-3", "agent", "operator"}
    for n in (1, 2, 3):
        assert ids[f"peer-{n}"] == {"uri": f"spiffe://floe.floe.internal/floe/peer/{n}",
                                    "dns_names": [f"floe-metadata-{n}.floe.internal"],
                                    "uses": ["digital_signature", "server_auth", "client_auth"]}
    assert ids["agent"] == {"uri": "spiffe://floe.floe.internal/floe/agent/0", "dns_names": [],
                            "uses": ["digital_signature", "server_auth", "client_auth"]}
    assert ids["operator"] == {"uri": "spiffe://floe.floe.internal/floe/operator/admin", "dns_names": [],
                               "uses": ["digital_signature", "client_auth"]}
    other = evaluate(identity_root, {"name": "prod", "dns_zone_name": "corp.example"})
    assert other["metadata_tls_identities"]["peer-2"]["uri"] == "spiffe://prod.corp.example/floe/peer/2"
    assert other["metadata_tls_identities"]["peer-2"]["dns_names"] == ["prod-metadata-2.corp.example"]
    assert evaluate(identity_root, {"metadata_mtls": False})["metadata_tls_identities"] == {}


def test_each_role_reads_only_its_own_secrets(identity_root):
    got = evaluate(identity_root, {"tls_secret_arn": TLS_SECRET, "operator_token_secret_arn": TOKEN_SECRET})
    assert got["agent_secret_arns"] == [TLS_SECRET, TOKEN_SECRET, stand_in("agent")]
    assert got["metadata_secret_arns"] == [TOKEN_SECRET, stand_in("peer-1"), stand_in("peer-2"), stand_in("peer-3")]
    assert got["agent_secret_regions"] == ["eu-west-1", "eu-central-1"]
    assert got["metadata_secret_regions"] == ["eu-central-1", "eu-west-1"]
    for arns in (got["agent_secret_arns"], got["metadata_secret_arns"]):
        assert stand_in("operator") not in arns
    plaintext = evaluate(identity_root, {"metadata_mtls": False, "operator_token_secret_arn": TOKEN_SECRET})
    assert plaintext["agent_secret_arns"] == [TOKEN_SECRET]
    assert plaintext["metadata_secret_arns"] == [TOKEN_SECRET]
    assert plaintext["metadata_secret_regions"] == ["eu-central-1"]
    assert evaluate(identity_root, {"metadata_mtls": False})["metadata_secret_arns"] == []


# ---------------------------------------------------------------- the module, validated


# pki.tf's locals, as validate_root stands them in for the tls provider's resources.
PKI_STUB_LOCALS = {
    "metadata_tls_bundles": '{ for k, v in local.metadata_tls_identities : k => { cert = "c", key = "k", ca = "a" } }',
    "metadata_tls_agent_serial": 'var.metadata_mtls ? "1" : ""',
    "metadata_tls_ca_cert_pem": 'var.metadata_mtls ? "a" : null',
}
PLUGIN_DIR = Path(os.environ.get("FLOE_TF_PLUGIN_DIR", "/opt/tf-plugins"))


def test_module_validates_with_the_tls_resources_stood_in(tmp_path):
    """`terraform validate` of the example (and so the module) against the
    real aws provider schema, with pki.tf replaced by locals of the same shape:
    the tls provider cannot be downloaded here."""
    if shutil.which("terraform") is None:
        pytest.skip("no terraform binary")
    if not list(PLUGIN_DIR.glob("registry.terraform.io/hashicorp/aws/5.*")):
        pytest.skip(f"no hashicorp/aws 5.x provider under {PLUGIN_DIR} (set FLOE_TF_PLUGIN_DIR)")
    copy = tmp_path / "terraform"
    shutil.copytree(TF_DIR, copy, ignore=shutil.ignore_patterns(".terraform", ".terraform.lock.hcl", "*.tfstate*"))
    (copy / "modules" / "floe" / "pki.tf").write_text(
        "locals {\n" + "".join(f"  {k} = {v}\n" for k, v in PKI_STUB_LOCALS.items()) + "}\n")
    for versions in (copy / "modules" / "floe" / "versions.tf", copy / "examples" / "byoc" / "versions.tf"):
        source, n = re.subn(r"\n    tls = \{.*?\n    \}", "", versions.read_text(), flags=re.S)
        assert n == 1, versions
        versions.write_text(source)
    example = copy / "examples" / "byoc"
    env_args = {"cwd": example, "capture_output": True, "text": True, "timeout": 300}
    run = subprocess.run(["terraform", "init", "-backend=false", "-input=false", "-no-color",
                          f"-plugin-dir={PLUGIN_DIR}"], **env_args)
    assert run.returncode == 0, run.stdout + run.stderr
    run = subprocess.run(["terraform", "validate", "-no-color"], **env_args)
    assert run.returncode == 0, run.stdout + run.stderr


STUB_CURL_METRICS = r"""#!/bin/bash
for a in "$@"; do url=$a; done
echo "curl $url" >>"$STUB_LOG"
[ -n "${STUB_NO_METRICS:-}" ] && exit 7
printf '# TYPE floe_agent_utilization gauge\nfloe_agent_utilization_component{component="cpu"} 0.4\nfloe_agent_utilization 1.25\n'
"""
STUB_AWS_LOG = '#!/bin/bash\necho "aws $*" >>"$STUB_LOG"\n'


@pytest.mark.parametrize("metrics", [True, False])
def test_the_utilization_publisher_sends_the_agents_figure_to_cloudwatch(renders, tmp_path, metrics):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, body in (("curl", STUB_CURL_METRICS), ("aws", STUB_AWS_LOG)):
        (bin_dir / name).write_text(body)
        (bin_dir / name).chmod(0o755)
    (tmp_path / "publish.sh").write_text(renders["publish-utilization.sh.tftpl"])
    log = tmp_path / "stub.log"
    log.write_text("")
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "STUB_LOG": str(log), "FLOE_PUBLISH_ONCE": "1"}
    if not metrics:
        env["STUB_NO_METRICS"] = "1"
    run = subprocess.run(["bash", str(tmp_path / "publish.sh")], capture_output=True, text=True, env=env, timeout=30)
    assert run.returncode == 0, run.stderr
    calls = log.read_text().splitlines()
    assert calls[0] == "curl https://127.0.0.1:8080/metrics"
    if metrics:
        assert calls[1:] == ["aws cloudwatch put-metric-data --region eu-west-1 --namespace Floe --metric-name "
                             "AgentUtilization --dimensions AutoScalingGroupName=floe-agent --value 1.25 --unit None"]
    else:
        assert calls[1:] == [] and "no floe_agent_utilization" in run.stderr
    unit = renders["floe-utilization.service.tftpl"]
    assert "ExecStart=/usr/local/sbin/floe-publish-utilization" in unit and "User=floe" in unit


def test_the_agent_unit_passes_its_cpu_target(renders):
    assert "autoscale_cpu_target     = var.agent_cpu_target_percent / 100" in (MODULE_DIR / "agents.tf").read_text()
    assert flag_value(agent_args(renders, "agent-tls"), "--autoscale-cpu-target") == "0.6"
