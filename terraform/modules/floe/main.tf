# Shared lookups and names. The rest of the module is split by concern:
# s3.tf (bucket), iam.tf (instance roles), network.tf (security groups and the
# S3 endpoint), dns.tf, metadata.tf, agents.tf, nlb.tf, alarms.tf, pki.tf (the
# metadata port's certificates) and secrets.tf (where instances read them).

data "aws_region" "current" {}

data "aws_caller_identity" "current" {}

data "aws_partition" "current" {}

data "aws_subnet" "metadata" {
  count = 3
  id    = var.metadata_subnet_ids[count.index]
}

data "aws_ssm_parameter" "al2023_ami" {
  count = var.ami_id == null ? 1 : 0
  name  = "/aws/service/ami-amazon-linux-latest/al2023-ami-kernel-default-${var.architecture}"
}

locals {
  # Ports fixed by the Floe CLI flags the module launches.
  kafka_port    = 9092
  http_port     = 8080
  metadata_port = 9093
  # Fetch agents' peer listener (--peer-addr): agents of a zone ask a block's
  # owner for it there, so each block is read from S3 once per zone.
  peer_port = 9096
  # Metadata nodes' /metrics (--metrics-addr), for monitoring_cidr_blocks only.
  metadata_metrics_port = 9094
  # The load balancer's Kafka bootstrap for consumers when fetch agents have a
  # pool of their own (agent_fetch_pool); they still listen on kafka_port.
  fetch_bootstrap_port = 9095

  # One autoscaling group per agent pool: all roles in one, or (with
  # agent_fetch_pool) produce and jobs agents beside fetch agents.
  agent_pools = merge(
    {
      main = {
        asg_name       = "${var.name}-agent"
        roles          = var.agent_fetch_pool == null ? "produce,fetch,jobs" : "produce,jobs"
        instance_type  = var.agent_instance_type
        min_size       = var.agent_min_size
        max_size       = var.agent_max_size
        kafka_target   = "kafka"
        bootstrap_port = local.kafka_port
      }
    },
    var.agent_fetch_pool == null ? {} : {
      fetch = {
        asg_name       = "${var.name}-agent-fetch"
        roles          = "fetch"
        instance_type  = coalesce(var.agent_fetch_pool.instance_type, var.agent_instance_type)
        min_size       = var.agent_fetch_pool.min_size
        max_size       = var.agent_fetch_pool.max_size
        kafka_target   = "fetch"
        bootstrap_port = local.fetch_bootstrap_port
      }
    },
  )

  # Load balancer target groups: name => (agent port, listener port).
  nlb_targets = merge(
    {
      kafka = { port = local.kafka_port, listener_port = local.kafka_port }
      http  = { port = local.http_port, listener_port = local.http_port }
    },
    var.agent_fetch_pool == null ? {} : {
      fetch = { port = local.kafka_port, listener_port = local.fetch_bootstrap_port }
    },
  )

  tags = merge(var.tags, { "floe:cluster" = var.name })

  region     = data.aws_region.current.name
  account_id = data.aws_caller_identity.current.account_id
  partition  = data.aws_partition.current.partition

  ami_id = var.ami_id != null ? var.ami_id : nonsensitive(data.aws_ssm_parameter.al2023_ami[0].value)

  bucket_name = var.bucket_name != null ? var.bucket_name : "${var.name}-${local.account_id}-${local.region}"

  # ARNs the instance role and bucket policy are scoped to: the bucket itself
  # (ListBucket and bucket-level reads) and the objects under the prefix.
  bucket_arn        = aws_s3_bucket.this.arn
  prefix_object_arn = "${aws_s3_bucket.this.arn}/${var.bucket_prefix}/*"

  object_store_url = "s3://${aws_s3_bucket.this.id}/${var.bucket_prefix}"

  # ARN of the floe binary's object (s3://bucket/key -> arn:...:s3:::bucket/key)
  # when instances fetch it from S3; the role may read that one object.
  binary_s3_object_arn = startswith(var.floe_binary_source, "s3://") ? "arn:${local.partition}:s3:::${trimprefix(var.floe_binary_source, "s3://")}" : null

  dns_zone_id = var.existing_dns_zone_id != null ? var.existing_dns_zone_id : aws_route53_zone.this[0].zone_id

  metadata_nodes = {
    for i, subnet_id in var.metadata_subnet_ids : tostring(i + 1) => {
      node_id   = i + 1
      subnet_id = subnet_id
      az        = data.aws_subnet.metadata[i].availability_zone
      fqdn      = "${var.name}-metadata-${i + 1}.${var.dns_zone_name}"
    }
  }

  # "1=host:9093,2=host:9093,3=host:9093" for --peers and "host:9093,..." for --metadata.
  metadata_peers = join(",", [for id, n in local.metadata_nodes : "${id}=${n.fqdn}:${local.metadata_port}"])
  metadata_addrs = join(",", [for id, n in local.metadata_nodes : "${n.fqdn}:${local.metadata_port}"])

  # Mutual TLS on the metadata port (pki.tf, secrets.tf): one identity per
  # metadata node, one for all agents and one operator, each a SPIFFE ID in
  # the cluster's own trust domain. Empty with metadata_mtls = false.
  metadata_trust_domain = "${var.name}.${var.dns_zone_name}"
  metadata_tls_identities = var.metadata_mtls ? merge(
    { for id, n in local.metadata_nodes : "peer-${id}" => {
      uri = "spiffe://${local.metadata_trust_domain}/floe/peer/${id}"
      # Peers, agents and floe admin dial a metadata node by its stable name
      # (--peers, --metadata) and check it against the certificate: the name
      # is in it. The private IP is not: nobody dials it, and it changes when
      # the instance is replaced.
      dns_names = [n.fqdn]
      uses      = ["digital_signature", "server_auth", "client_auth"]
    } },
    {
      # Agents are an autoscaling group: instances come and go without a
      # Terraform apply, so Terraform cannot issue each its own certificate.
      # They share one identity, agent 0, and are told apart by their node
      # ids (--node-id), not by their certificates. Agents also serve each
      # other blocks (server_auth); they check a peer's chain and role, not
      # an address, and metadata clients still require the peer role.
      agent = {
        uri       = "spiffe://${local.metadata_trust_domain}/floe/agent/0"
        dns_names = []
        uses      = ["digital_signature", "server_auth", "client_auth"]
      }
      # For people running floe admin; no instance role can read it.
      operator = {
        uri       = "spiffe://${local.metadata_trust_domain}/floe/operator/admin"
        dns_names = []
        uses      = ["digital_signature", "client_auth"]
      }
    },
  ) : {}

  # Where client TLS ends: "nlb" (the load balancer's TLS listeners, with the
  # ACM certificate tls_certificate_arn), "agent" (each agent, with the
  # certificate and key of the Secrets Manager secret tls_secret_arn) or
  # "none" (only with allow_unauthenticated). Preconditions on the agent
  # launch template refuse every other combination.
  tls_mode = var.tls_certificate_arn != null ? "nlb" : var.tls_secret_arn != null ? "agent" : "none"

  # What agents advertise. With TLS on the load balancer it must be the load
  # balancer: the agents themselves speak plaintext.
  advertised_address = coalesce(var.agent_advertised_address, local.tls_mode == "nlb" ? "load_balancer" : "private_ip")

  # The name clients use: bootstrap, HTTP API, and every Kafka connection when
  # agents advertise the load balancer.
  endpoint_host = coalesce(var.client_endpoint_dns_name, aws_lb.this.dns_name)

  # Secrets each kind of instance reads at boot, by full ARN; its role may
  # read these and nothing else in Secrets Manager. Agents: their client TLS
  # certificate, the operator token and the agents' metadata certificate.
  # Metadata nodes: the operator token and the peers' certificates (each node
  # reads its own; peers trust each other with everything anyway). The
  # operator's certificate is in neither list.
  agent_secret_arns = concat(
    [for arn in [var.tls_secret_arn, var.operator_token_secret_arn] : arn if arn != null],
    [for k, s in aws_secretsmanager_secret.metadata_tls : s.arn if k == "agent"],
  )
  metadata_secret_arns = concat(
    [for arn in [var.operator_token_secret_arn] : arn if arn != null],
    [for k, s in aws_secretsmanager_secret.metadata_tls : s.arn if startswith(k, "peer-")],
  )
  # Regions of those secrets, for kms:ViaService (the module's own are in
  # this region; the ARNs of the others are known at plan time).
  agent_secret_regions = distinct(concat(
    [for arn in [var.tls_secret_arn, var.operator_token_secret_arn] : split(":", arn)[3] if arn != null],
    var.metadata_mtls ? [local.region] : [],
  ))
  metadata_secret_regions = distinct(concat(
    [for arn in [var.operator_token_secret_arn] : split(":", arn)[3] if arn != null],
    var.metadata_mtls ? [local.region] : [],
  ))

  # The roles the instances run as: the bucket policy admits these two.
  instance_role_arns = [aws_iam_role.floe.arn, aws_iam_role.metadata.arn]

  # Rendered by every instance's cloud-init: install the binary, then run one
  # floe role under systemd.
  install_script = templatefile("${path.module}/templates/install-floe.sh.tftpl", {
    binary_source = var.floe_binary_source
    binary_sha256 = var.floe_binary_sha256 == null ? "" : var.floe_binary_sha256
    region        = local.region
  })
}
