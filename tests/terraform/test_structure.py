"""Structural checks of terraform/ that need no provider download.

Every .tf file is parsed with python-hcl2 and the security and operability
properties the BYOC module promises (issue 9) are asserted on the parsed
blocks: documented, typed and validated variables; a private, encrypted
bucket that aborts stale multipart uploads; an IAM policy scoped to the
bucket and prefix; no ingress from anywhere; the metadata port reachable
only from the cluster's own security groups; cross-zone load balancing off;
IMDSv2 and encrypted EBS everywhere; tags on every taggable resource.

When a `terraform` binary exists, the cloud-init templates are also rendered
with Terraform's own template engine (a throwaway root module with no
providers) and the rendered YAML and shell scripts are checked.

Run through scripts/test-terraform.sh, which provides python-hcl2 and pytest.
"""

from __future__ import annotations

import functools
import json
import re
import shutil
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

KAFKA_PORT, HTTP_PORT, METADATA_PORT = 9092, 8080, 9093
ANYWHERE = {"0.0.0.0/0", "::/0"}

# Resource types that take no `tags` argument. Every other resource type must
# be tagged, so a new resource type is tagged unless it is listed here.
UNTAGGABLE = {
    "aws_autoscaling_policy",
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


def test_example_calls_the_module():
    calls = [b for doc in module_files(EXAMPLE_DIR).values() for b in doc.get("module", [])]
    floe = calls[0]["floe"]
    assert floe["source"] == "../../modules/floe"
    for required in ("vpc_id", "agent_subnet_ids", "metadata_subnet_ids", "client_cidr_blocks", "floe_binary_source", "tags"):
        assert required in floe, f"example does not pass {required}"
    outputs = labelled(EXAMPLE_DIR, "output")
    for name in ("bootstrap_servers", "http_endpoint", "bucket_name"):
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
    for name in ("bootstrap_servers", "http_endpoint", "bucket_name", "role_arn", "prometheus_scrape_config"):
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
    assert len(fence) == 1, "no statement denies object access to principals other than the Floe role"
    assert "aws_iam_role.floe.arn" in text(fence[0]["condition"])

    for s in statements:
        if s.get("effect", "Allow") == "Allow":
            principals = one(s["principals"])
            assert principals["identifiers"] == ["${aws_iam_role.floe.arn}"], s


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
                source = referenced_locals_text(text(rule.get("for_each", "")) + cidr)
                lists = set(re.findall(r"var\.(\w+)", source))
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
    for name, rule in ingress_rules():
        if rule_cidrs(rule):
            assert possible_ports(rule) <= {KAFKA_PORT, HTTP_PORT}, name


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
        hc = one(tg["health_check"])
        assert hc["protocol"] == "HTTP" and hc["path"] == "/readyz", name
        assert resolve(hc["port"]) == HTTP_PORT, name
    listeners = one(list(resources_of("aws_lb_listener").values()))
    assert listeners["for_each"] == "${aws_lb_target_group.agent}"
    assert groups["agent"]["for_each"] == {"kafka": "${local.kafka_port}", "http": "${local.http_port}"}


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


def test_agents_autoscale_on_cpu_across_the_subnets():
    asg = resources_of("aws_autoscaling_group")["agent"]
    assert asg["vpc_zone_identifier"] == "${var.agent_subnet_ids}"
    assert asg["health_check_type"] == "ELB"
    assert one(asg["launch_template"])["version"] == "${aws_launch_template.agent.latest_version}"
    assert one(asg["instance_refresh"])["strategy"] == "Rolling"
    policy = resources_of("aws_autoscaling_policy")["agent_cpu"]
    assert policy["policy_type"] == "TargetTrackingScaling"
    spec = one(one(policy["target_tracking_configuration"])["predefined_metric_specification"])
    assert spec["predefined_metric_type"] == "ASGAverageCPUUtilization"


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
    """Names a Terraform template interpolates (not escaped $${...})."""
    names = set()
    for m in re.finditer(r"(?<!\$)\$\{\s*([^}]*)\}", source):
        names.update(re.findall(r"\b([a-z_][a-z0-9_]*)\b(?!\s*\()", m.group(1)))
    return names - {"indent"}


def templatefile_calls() -> dict[str, set[str]]:
    """Template name -> keys the module passes to templatefile() for it."""
    calls: dict[str, set[str]] = {}
    source = "\n".join(p.read_text() for p in MODULE_DIR.glob("*.tf"))
    for m in re.finditer(r'templatefile\("\$\{path\.module\}/templates/([\w.-]+)",\s*\{', source):
        depth, i = 1, m.end()
        while depth:
            depth += {"{": 1, "}": -1}.get(source[i], 0)
            i += 1
        body = source[m.end():i - 1]
        # Keys at the top level of this map only.
        keys, depth = set(), 0
        for line in body.splitlines():
            if depth == 0 and (k := re.match(r"\s*(\w+)\s*=", line)):
                keys.add(k.group(1))
            depth += line.count("{") - line.count("}") + line.count("(") - line.count(")")
        calls.setdefault(m.group(1), set()).update(keys)
    return calls


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


RENDER_VALUES = {
    "install-floe.sh.tftpl": {"binary_source": "s3://artifacts/floe/floe", "binary_sha256": "ab" * 32, "region": "eu-west-1"},
    "prepare-agent.sh.tftpl": {"advertised_address": "private_ip", "region": "eu-west-1"},
    "prepare-metadata.sh.tftpl": {"node_id": "2", "fqdn": "floe-metadata-2.floe.internal", "volume_id": "vol-0123456789abcdef0",
                                  "volume_serial": "vol0123456789abcdef0", "region": "eu-west-1"},
    "floe-agent.service.tftpl": {"metadata_addrs": "m1:9093,m2:9093,m3:9093", "kafka_port": 9092, "http_port": 8080,
                                 "object_store_url": "s3://b/floe", "extra_args": " --flush-interval-ms 100"},
    "floe-metadata.service.tftpl": {"node_id": "2", "fqdn": "floe-metadata-2.floe.internal", "metadata_port": 9093,
                                    "peers": "1=m1:9093,2=m2:9093,3=m3:9093", "object_store_url": "s3://b/floe"},
}


def _hcl_object(values: dict) -> str:
    return "{" + ", ".join(f"{k} = {json.dumps(v)}" for k, v in values.items()) + "}"


@functools.cache
def rendered(tmp_root: Path) -> dict[str, str]:
    """Renders each template and both cloud-init documents with Terraform."""
    def call(name, values):
        return f'templatefile("{TEMPLATES_DIR / name}", {values})'

    outputs = {name: call(name, _hcl_object(v)) for name, v in RENDER_VALUES.items()}
    for role, prepare, unit in (("agent", "prepare-agent.sh.tftpl", "floe-agent.service.tftpl"),
                                ("metadata", "prepare-metadata.sh.tftpl", "floe-metadata.service.tftpl")):
        outputs[f"cloud-init-{role}"] = call("cloud-init.yaml.tftpl", "{" + ", ".join([
            f'role = "{role}"', f'unit_name = "floe-{role}.service"',
            f'install_script = {outputs["install-floe.sh.tftpl"]}',
            f"prepare_script = {outputs[prepare]}", f"unit = {outputs[unit]}"]) + "}")
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
    assert set(files) == {"/usr/local/sbin/floe-install", "/usr/local/sbin/floe-prepare", f"/etc/systemd/system/floe-{role}.service"}
    for path in ("/usr/local/sbin/floe-install", "/usr/local/sbin/floe-prepare"):
        script = files[path]["content"]
        assert script.startswith("#!/bin/bash\n"), path
        target = tmp_path / Path(path).name
        target.write_text(script)
        check = subprocess.run(["bash", "-n", str(target)], capture_output=True, text=True)
        assert check.returncode == 0, f"{path}: {check.stderr}"
    unit = files[f"/etc/systemd/system/floe-{role}.service"]["content"]
    exec_start = next(line for line in unit.splitlines() if line.startswith("ExecStart="))
    assert "${" not in exec_start.replace("${FLOE_ZONE}", "").replace("${FLOE_ADVERTISED_HOST}", "")
    if role == "agent":
        assert exec_start.endswith("--zone ${FLOE_ZONE} --flush-interval-ms 100")
    else:
        assert "--peers 1=m1:9093,2=m2:9093,3=m3:9093" in exec_start
    runcmd = doc["runcmd"][0]
    assert runcmd[:2] == ["sh", "-ec"] and f"systemctl enable --now floe-{role}.service" in runcmd[2]
    assert len(source.encode()) < 16 * 1024, "EC2 user data is limited to 16 KiB"


def test_rendered_install_script_checks_the_configured_hash(renders):
    script = renders["install-floe.sh.tftpl"]
    assert f"want_sha256='{'ab' * 32}'" in script
    assert "source_uri='s3://artifacts/floe/floe'" in script
