# Inputs of the Floe BYOC module. Every variable is typed and documented; every
# variable whose domain is narrower than its type carries a validation block.
# Cross-variable rules (min <= max, three distinct AZs, ...) are preconditions
# on the resources that depend on them, so they also work on Terraform 1.5.

# ---------------------------------------------------------------- identity

variable "name" {
  description = "Cluster name. Prefixes every resource name and is the value of the floe:cluster tag. Lowercase letters, digits and dashes, 2-24 characters, starting with a letter."
  type        = string
  default     = "floe"

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{1,23}$", var.name))
    error_message = "name must be 2-24 characters of [a-z0-9-], starting with a letter."
  }
}

variable "tags" {
  description = "Tags merged into every taggable resource the module creates (on top of floe:cluster and Name)."
  type        = map(string)
  default     = {}

  validation {
    condition     = alltrue([for k in keys(var.tags) : !startswith(lower(k), "aws:")])
    error_message = "Tag keys may not start with the reserved prefix aws:."
  }
}

# ---------------------------------------------------------------- network

variable "vpc_id" {
  description = "ID of the customer VPC Floe is deployed into."
  type        = string

  validation {
    condition     = can(regex("^vpc-[0-9a-f]{8,17}$", var.vpc_id))
    error_message = "vpc_id must look like vpc-0123456789abcdef0."
  }
}

variable "agent_subnet_ids" {
  description = "Private subnets for the agent autoscaling group and the Network Load Balancer, one per availability zone (two or more zones)."
  type        = list(string)

  validation {
    condition     = length(var.agent_subnet_ids) >= 2 && length(var.agent_subnet_ids) <= 6 && alltrue([for s in var.agent_subnet_ids : can(regex("^subnet-[0-9a-f]{8,17}$", s))])
    error_message = "agent_subnet_ids must hold 2 to 6 subnet IDs (subnet-...)."
  }
}

variable "metadata_subnet_ids" {
  description = "Exactly three private subnets, each in a different availability zone; metadata node N (1..3) runs in the Nth subnet."
  type        = list(string)

  validation {
    condition     = length(var.metadata_subnet_ids) == 3 && length(distinct(var.metadata_subnet_ids)) == 3 && alltrue([for s in var.metadata_subnet_ids : can(regex("^subnet-[0-9a-f]{8,17}$", s))])
    error_message = "metadata_subnet_ids must hold exactly 3 distinct subnet IDs (subnet-...)."
  }
}

variable "route_table_ids" {
  description = "Route tables of the agent and metadata subnets. The S3 gateway endpoint is added to them so object traffic never crosses a NAT gateway."
  type        = list(string)

  validation {
    condition     = length(var.route_table_ids) >= 1 && alltrue([for r in var.route_table_ids : can(regex("^rtb-[0-9a-f]{8,17}$", r))])
    error_message = "route_table_ids must hold at least one route table ID (rtb-...)."
  }
}

variable "create_s3_gateway_endpoint" {
  description = "Create an S3 gateway VPC endpoint on route_table_ids. Set to false when those route tables already have one (AWS allows one per route table)."
  type        = bool
  default     = true
}

variable "client_cidr_blocks" {
  description = "IPv4 CIDR blocks of the Kafka and HTTP clients. Only these reach ports 9092 and 8080, on the load balancer and on the agents (Kafka clients connect to each agent's advertised address after bootstrap). 0.0.0.0/0 is refused."
  type        = list(string)

  validation {
    condition     = length(var.client_cidr_blocks) >= 1 && alltrue([for c in var.client_cidr_blocks : can(cidrnetmask(c)) && c != "0.0.0.0/0"])
    error_message = "client_cidr_blocks must hold at least one valid IPv4 CIDR, and 0.0.0.0/0 is not allowed."
  }
}

variable "monitoring_cidr_blocks" {
  description = "Extra IPv4 CIDR blocks allowed to scrape /metrics on the agents' port 8080 (e.g. a Prometheus subnet outside client_cidr_blocks). 0.0.0.0/0 is refused."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for c in var.monitoring_cidr_blocks : can(cidrnetmask(c)) && c != "0.0.0.0/0"])
    error_message = "monitoring_cidr_blocks must be valid IPv4 CIDRs, and 0.0.0.0/0 is not allowed."
  }
}

variable "agent_advertised_address" {
  description = "What each agent advertises to Kafka clients, who connect to it directly after bootstrap: private_ip (its private IPv4 address, reachable over peering and transit gateways), private_dns (its private DNS name; needs VPC DNS hostnames and resolution from the client) or load_balancer (client_endpoint_dns_name, else the NLB's DNS name: every Kafka connection then goes through the NLB). Null picks load_balancer with tls_certificate_arn (the only mode that works when the NLB terminates TLS) and private_ip otherwise."
  type        = string
  default     = null

  validation {
    # coalesce: contains() refuses a null value, and || does not short-circuit.
    condition     = contains(["private_ip", "private_dns", "load_balancer"], coalesce(var.agent_advertised_address, "private_ip"))
    error_message = "agent_advertised_address must be null, private_ip, private_dns or load_balancer."
  }
}

variable "client_endpoint_dns_name" {
  description = "DNS name clients use for the cluster (bootstrap, HTTP API, and every Kafka connection when agents advertise load_balancer), e.g. kafka.example.com. It must resolve to the NLB (see client_endpoint_zone_id) and be a name the TLS certificate covers. Required with tls_certificate_arn; null uses the NLB's own DNS name."
  type        = string
  default     = null

  validation {
    condition     = var.client_endpoint_dns_name == null || can(regex("^([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\\.)+[a-z]{2,63}$", var.client_endpoint_dns_name))
    error_message = "client_endpoint_dns_name must be null or a lowercase DNS name such as kafka.example.com."
  }
}

variable "client_endpoint_zone_id" {
  description = "ID of a Route 53 hosted zone (public or private) in which the module creates client_endpoint_dns_name as an alias of the NLB. Null creates no record: point the name at nlb_dns_name yourself."
  type        = string
  default     = null

  validation {
    condition     = var.client_endpoint_zone_id == null || can(regex("^Z[0-9A-Z]{1,31}$", var.client_endpoint_zone_id))
    error_message = "client_endpoint_zone_id must be null or a hosted zone ID such as Z0123456789ABCDEFGHIJ."
  }
}

# ---------------------------------------------------------------- security: TLS, SASL, API keys

variable "allow_unauthenticated" {
  description = "Run without authentication: no SASL on the Kafka listener and no API keys on the HTTP API, so anyone in client_cidr_blocks can read, write and delete every topic; TLS is then optional (used if tls_certificate_arn or tls_secret_arn is set). Leave false: a plan with neither TLS variable fails unless this is true."
  type        = bool
  default     = false
}

variable "tls_certificate_arn" {
  description = "ARN of an ACM certificate for client_endpoint_dns_name. The NLB's Kafka and HTTP listeners become TLS listeners that terminate with it (nlb_tls_policy); the NLB talks plaintext to the agents inside the VPC, and agents advertise the load balancer so no client reaches them directly. Exclusive with tls_secret_arn."
  type        = string
  default     = null

  validation {
    condition     = var.tls_certificate_arn == null || can(regex("^arn:aws[a-z-]*:acm:[a-z0-9-]+:[0-9]{12}:certificate/[0-9a-f-]+$", var.tls_certificate_arn))
    error_message = "tls_certificate_arn must be null or an ACM certificate ARN (arn:aws:acm:REGION:ACCOUNT:certificate/ID)."
  }
}

variable "tls_secret_arn" {
  description = "Full ARN of a Secrets Manager secret whose value is JSON {\"cert\": PEM chain, \"key\": PEM private key}. Each agent reads it at boot (the role may read this secret only), writes the files mode 0600 and serves both listeners over TLS itself (--tls-cert/--tls-key); the NLB stays TCP passthrough and health-checks over HTTPS. Exclusive with tls_certificate_arn."
  type        = string
  default     = null

  validation {
    condition     = var.tls_secret_arn == null || can(regex("^arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:[0-9]{12}:secret:[A-Za-z0-9/_+=.@-]+-[A-Za-z0-9]{6}$", var.tls_secret_arn))
    error_message = "tls_secret_arn must be null or the full ARN of a Secrets Manager secret, with the 6-character suffix Secrets Manager adds (arn:aws:secretsmanager:REGION:ACCOUNT:secret:NAME-AbCdEf)."
  }
}

variable "operator_token_secret_arn" {
  description = "Full ARN of a Secrets Manager secret whose value is the operator token (at least 24 characters). Each agent reads it at boot into a 0600 file and serves the operator API (/v1/admin) with --operator-token-file; each metadata node reads it too, to check the operator commands agents relay. Null: the operator API is not served."
  type        = string
  default     = null

  validation {
    condition     = var.operator_token_secret_arn == null || can(regex("^arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:[0-9]{12}:secret:[A-Za-z0-9/_+=.@-]+-[A-Za-z0-9]{6}$", var.operator_token_secret_arn))
    error_message = "operator_token_secret_arn must be null or the full ARN of a Secrets Manager secret, with the 6-character suffix Secrets Manager adds."
  }
}

variable "secrets_kms_key_arn" {
  description = "ARN of the customer-managed KMS key that encrypts tls_secret_arn and operator_token_secret_arn, if not the default aws/secretsmanager key: the roles may then decrypt with it through Secrets Manager only. The secrets the module makes for metadata_mtls are encrypted with it too (with aws/secretsmanager when null)."
  type        = string
  default     = null

  validation {
    condition     = var.secrets_kms_key_arn == null || can(regex("^arn:aws[a-z-]*:kms:[a-z0-9-]+:[0-9]{12}:key/.+$", var.secrets_kms_key_arn))
    error_message = "secrets_kms_key_arn must be null or a KMS key ARN (arn:aws:kms:REGION:ACCOUNT:key/ID)."
  }
}

variable "metadata_mtls" {
  description = "Mutual TLS on the metadata port (9093): the module makes a cluster CA and certificates for the metadata nodes, the agents and one operator with the tls provider (their private keys are then in the Terraform state, which must be encrypted), keeps each in Secrets Manager, and starts floe with --metadata-tls-cert/--metadata-tls-key/--metadata-tls-ca. False runs the metadata port in plaintext (--metadata-allow-plaintext), kept to the agent and metadata security groups only."
  type        = bool
  default     = true
}

variable "metadata_tls_validity_days" {
  description = "Days the metadata port's certificates (metadata nodes, agents, operator) are valid; the CA lasts 10 years. The first apply within 30 days of expiry issues new ones, signed by the same CA: instances read theirs at boot, so roll them after that apply (the agent group rolls by itself)."
  type        = number
  default     = 365

  validation {
    condition     = var.metadata_tls_validity_days >= 60 && var.metadata_tls_validity_days <= 3650 && floor(var.metadata_tls_validity_days) == var.metadata_tls_validity_days
    error_message = "metadata_tls_validity_days must be a whole number from 60 to 3650."
  }
}

variable "nlb_tls_policy" {
  description = "Security policy of the NLB's TLS listeners (with tls_certificate_arn). TLS 1.2 is the least it may allow."
  type        = string
  default     = "ELBSecurityPolicy-TLS13-1-2-2021-06"

  validation {
    condition     = can(regex("^ELBSecurityPolicy-(TLS13-|TLS-1-2-|FS-1-2-)", var.nlb_tls_policy))
    error_message = "nlb_tls_policy must be an ELBSecurityPolicy-TLS13-*, ELBSecurityPolicy-TLS-1-2-* or ELBSecurityPolicy-FS-1-2-* policy (TLS 1.2 or later)."
  }
}

variable "sasl_enable_plain" {
  description = "Also offer SASL/PLAIN on the Kafka listener (besides SCRAM-SHA-512 and SCRAM-SHA-256). PLAIN sends the password itself, so it is refused without TLS or with allow_unauthenticated."
  type        = bool
  default     = false
}

variable "max_connections" {
  description = "Kafka connections one agent holds at once (--max-connections, Kafka's max.connections). When full, the oldest connection that has not authenticated is closed for the new one."
  type        = number
  default     = 10000

  validation {
    condition     = var.max_connections >= 1 && var.max_connections <= 1000000 && floor(var.max_connections) == var.max_connections
    error_message = "max_connections must be a whole number from 1 to 1000000."
  }
}

variable "max_connections_per_ip" {
  description = "Kafka connections one client address may hold on one agent (--max-connections-per-ip, Kafka's max.connections.per.ip); more are closed at once. Raise it for clients behind a NAT gateway or proxy."
  type        = number
  default     = 1000

  validation {
    condition     = var.max_connections_per_ip >= 1 && var.max_connections_per_ip <= 1000000 && floor(var.max_connections_per_ip) == var.max_connections_per_ip
    error_message = "max_connections_per_ip must be a whole number from 1 to 1000000."
  }
}

variable "auth_failures_per_minute" {
  description = "Failed authentications (SASL, API key, operator token) one client address may make in a minute before it is refused until the minute ends (--auth-failures-per-minute). 0 turns the limit off."
  type        = number
  default     = 10

  validation {
    condition     = var.auth_failures_per_minute >= 0 && var.auth_failures_per_minute <= 100000 && floor(var.auth_failures_per_minute) == var.auth_failures_per_minute
    error_message = "auth_failures_per_minute must be a whole number from 0 to 100000."
  }
}

variable "dns_zone_name" {
  description = "Name of the Route 53 private hosted zone holding the metadata nodes' stable names (<name>-metadata-N.<zone>). Created unless existing_dns_zone_id is set."
  type        = string
  default     = "floe.internal"

  validation {
    condition     = can(regex("^([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\\.)+[a-z]{2,63}$", var.dns_zone_name))
    error_message = "dns_zone_name must be a lowercase DNS name such as floe.internal."
  }
}

variable "existing_dns_zone_id" {
  description = "ID of an existing private hosted zone associated with the VPC, whose name is dns_zone_name. Null creates a new zone."
  type        = string
  default     = null

  validation {
    condition     = var.existing_dns_zone_id == null || can(regex("^Z[0-9A-Z]{1,31}$", var.existing_dns_zone_id))
    error_message = "existing_dns_zone_id must be null or a hosted zone ID such as Z0123456789ABCDEFGHIJ."
  }
}

# ---------------------------------------------------------------- bucket

variable "bucket_name" {
  description = "Name of the S3 bucket Floe writes to. Null derives <name>-<account id>-<region>."
  type        = string
  default     = null

  validation {
    condition     = var.bucket_name == null || can(regex("^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$", var.bucket_name))
    error_message = "bucket_name must be null or a valid S3 bucket name (3-63 characters of [a-z0-9.-])."
  }
}

variable "bucket_prefix" {
  description = "Key prefix under which Floe keeps every object (segments, metadata snapshots). The IAM role can touch nothing outside it."
  type        = string
  default     = "floe"

  validation {
    condition     = can(regex("^[A-Za-z0-9][A-Za-z0-9_.-]*(/[A-Za-z0-9][A-Za-z0-9_.-]*)*$", var.bucket_prefix))
    error_message = "bucket_prefix must be non-empty path segments of [A-Za-z0-9_.-] separated by single slashes, with no leading or trailing slash."
  }
}

variable "bucket_force_destroy" {
  description = "Let `terraform destroy` delete a bucket that still holds objects (the applying principal must then be in bucket_admin_principal_arns, as the bucket policy denies object deletes to everyone else). Leave false in production: the bucket is Floe's only durable copy."
  type        = bool
  default     = false
}

variable "bucket_versioning_enabled" {
  description = "Turn on bucket versioning, so an object deleted by mistake (or by a bug in garbage collection) can be recovered for noncurrent_version_expiration_days."
  type        = bool
  default     = true
}

variable "noncurrent_version_expiration_days" {
  description = "Days a deleted or overwritten object version is kept when versioning is on. Floe never overwrites a segment, so this is the undo window for deletes."
  type        = number
  default     = 7

  validation {
    condition     = var.noncurrent_version_expiration_days >= 1 && var.noncurrent_version_expiration_days <= 365 && floor(var.noncurrent_version_expiration_days) == var.noncurrent_version_expiration_days
    error_message = "noncurrent_version_expiration_days must be a whole number from 1 to 365."
  }
}

variable "abort_incomplete_multipart_upload_days" {
  description = "Days after which S3 aborts a multipart upload that was never completed (an agent that died mid-upload), so its parts stop costing storage."
  type        = number
  default     = 1

  validation {
    condition     = var.abort_incomplete_multipart_upload_days >= 1 && var.abort_incomplete_multipart_upload_days <= 30 && floor(var.abort_incomplete_multipart_upload_days) == var.abort_incomplete_multipart_upload_days
    error_message = "abort_incomplete_multipart_upload_days must be a whole number from 1 to 30."
  }
}

variable "object_lock_enabled" {
  description = "Create the bucket with S3 Object Lock enabled (needs versioning; can only be chosen at creation). No default retention is set, so Floe's garbage collection still deletes objects."
  type        = bool
  default     = false
}

variable "kms_key_arn" {
  description = "ARN of a customer-managed KMS key for bucket encryption (SSE-KMS with an S3 bucket key). Null uses SSE-S3 (AES256), which costs no KMS requests."
  type        = string
  default     = null

  validation {
    condition     = var.kms_key_arn == null || can(regex("^arn:aws[a-z-]*:kms:[a-z0-9-]+:[0-9]{12}:key/.+$", var.kms_key_arn))
    error_message = "kms_key_arn must be null or a KMS key ARN (arn:aws:kms:REGION:ACCOUNT:key/ID)."
  }
}

variable "bucket_admin_principal_arns" {
  description = "IAM principal ARNs (besides the Floe roles of agents and metadata nodes) allowed to read and write objects under the prefix, e.g. a break-glass admin role. Everyone else is denied by the bucket policy."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for a in var.bucket_admin_principal_arns : can(regex("^arn:aws[a-z-]*:iam::[0-9]{12}:(role|user)/.+$", a))])
    error_message = "bucket_admin_principal_arns must be IAM role or user ARNs."
  }
}

variable "access_log_bucket" {
  description = "Name of an existing bucket that receives S3 server access logs for the Floe bucket. Null disables access logging."
  type        = string
  default     = null

  validation {
    condition     = var.access_log_bucket == null || can(regex("^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$", var.access_log_bucket))
    error_message = "access_log_bucket must be null or a valid S3 bucket name."
  }
}

# ---------------------------------------------------------------- binary and image

variable "floe_binary_source" {
  description = "Where instances download the floe binary at boot: an https:// URL or an s3://bucket/key object (read with the instance role). A single static Linux executable for the chosen architecture."
  type        = string

  validation {
    condition     = can(regex("^(https://[^\\s'\"]+|s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]/[^\\s'\"]+)$", var.floe_binary_source))
    error_message = "floe_binary_source must be an https:// URL or an s3://bucket/key URI without spaces or quotes."
  }
}

variable "floe_binary_sha256" {
  description = "Expected SHA-256 (hex) of the floe binary. When set, boot fails rather than run a binary that does not match. Strongly recommended."
  type        = string
  default     = null

  validation {
    condition     = var.floe_binary_sha256 == null || can(regex("^[0-9a-f]{64}$", var.floe_binary_sha256))
    error_message = "floe_binary_sha256 must be null or 64 lowercase hex characters."
  }
}

variable "architecture" {
  description = "CPU architecture of every instance; must match the floe binary and the instance types."
  type        = string
  default     = "x86_64"

  validation {
    condition     = contains(["x86_64", "arm64"], var.architecture)
    error_message = "architecture must be x86_64 or arm64."
  }
}

variable "ami_id" {
  description = "AMI for agents and metadata nodes. Null uses the latest Amazon Linux 2023 AMI for the architecture (looked up through SSM public parameters). The bootstrap script expects systemd, curl, the AWS CLI, python3 (cloud-init's own) and xfsprogs."
  type        = string
  default     = null

  validation {
    condition     = var.ami_id == null || can(regex("^ami-[0-9a-f]{8,17}$", var.ami_id))
    error_message = "ami_id must be null or an AMI ID (ami-...)."
  }
}

variable "enable_ssm" {
  description = "Attach AmazonSSMManagedInstanceCore to the instance role so operators reach instances with Session Manager (no SSH port is ever opened)."
  type        = bool
  default     = true
}

# ---------------------------------------------------------------- agents

variable "agent_instance_type" {
  description = "EC2 instance type of the agents. Sizing assumption: one 2-vCPU agent sustains 100-150 MB/s of produce (see docs/DEPLOYMENT.md)."
  type        = string
  default     = "c7i.large"

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]*\\.[a-z0-9]+$", var.agent_instance_type))
    error_message = "agent_instance_type must look like c7i.large."
  }
}

variable "agent_min_size" {
  description = "Minimum number of agents. Keep at least one per agent subnet so every zone has a local agent."
  type        = number
  default     = 3

  validation {
    condition     = var.agent_min_size >= 1 && var.agent_min_size <= 500 && floor(var.agent_min_size) == var.agent_min_size
    error_message = "agent_min_size must be a whole number from 1 to 500."
  }
}

variable "agent_max_size" {
  description = "Maximum number of agents the CPU target tracking policy may scale out to."
  type        = number
  default     = 12

  validation {
    condition     = var.agent_max_size >= 1 && var.agent_max_size <= 500 && floor(var.agent_max_size) == var.agent_max_size
    error_message = "agent_max_size must be a whole number from 1 to 500."
  }
}

variable "agent_fetch_pool" {
  description = "A second autoscaling group of fetch agents (floe agent --roles fetch) with a Kafka bootstrap of its own on the load balancer (port 9095, output fetch_bootstrap_servers); the main group then runs produce and jobs agents. Consumers that bootstrap there read through fetch agents, and consumers that set client.rack are sent to them by the produce agents (KIP-392). Split when catch-up reads or consumer fan-out should not share CPU and cache with produce (docs/OPERATIONS.md, \"Zones, agent roles and agent groups\"). Null: one group of all roles. Needs agents to advertise their own addresses (not load_balancer)."
  type = object({
    min_size      = number
    max_size      = number
    instance_type = optional(string)
  })
  default = null

  validation {
    condition     = var.agent_fetch_pool == null || try(var.agent_fetch_pool.min_size >= 1 && var.agent_fetch_pool.max_size <= 500 && var.agent_fetch_pool.min_size <= var.agent_fetch_pool.max_size && floor(var.agent_fetch_pool.min_size) == var.agent_fetch_pool.min_size && floor(var.agent_fetch_pool.max_size) == var.agent_fetch_pool.max_size, false)
    error_message = "agent_fetch_pool needs whole numbers 1 <= min_size <= max_size <= 500."
  }

  validation {
    condition     = try(var.agent_fetch_pool.instance_type, null) == null || can(regex("^[a-z][a-z0-9-]*\\.[a-z0-9]+$", var.agent_fetch_pool.instance_type))
    error_message = "agent_fetch_pool.instance_type must look like c7i.large."
  }
}

variable "agent_utilization_target" {
  description = "Average agent utilization the autoscaling group tracks: each agent's floe_agent_utilization is the highest of its CPU, flush-buffer fill and produce p99 latency over their targets (1 = at target). Lower leaves more headroom for bursts; higher costs less."
  type        = number
  default     = 0.8

  validation {
    condition     = var.agent_utilization_target >= 0.3 && var.agent_utilization_target <= 1.0
    error_message = "agent_utilization_target must be between 0.3 and 1.0."
  }
}

variable "agent_cpu_target_percent" {
  description = "The CPU utilisation that counts as fully used in an agent's utilization (its --autoscale-cpu-target), which the autoscaling group tracks with agent_utilization_target. Lower leaves more headroom for bursts; higher costs less."
  type        = number
  default     = 60

  validation {
    condition     = var.agent_cpu_target_percent >= 20 && var.agent_cpu_target_percent <= 90
    error_message = "agent_cpu_target_percent must be between 20 and 90."
  }
}

variable "agent_volume_size_gib" {
  description = "Size of each agent's encrypted gp3 root volume, which also holds the read cache (/var/cache/floe)."
  type        = number
  default     = 100

  validation {
    condition     = var.agent_volume_size_gib >= 20 && var.agent_volume_size_gib <= 16384 && floor(var.agent_volume_size_gib) == var.agent_volume_size_gib
    error_message = "agent_volume_size_gib must be a whole number from 20 to 16384."
  }
}

variable "agent_extra_args" {
  description = "Extra command-line flags appended to `floe agent` (e.g. [\"--flush-interval-ms\", \"100\"]). Each element is one argument without spaces. Flags the module sets itself (TLS, metadata TLS, SASL, API keys, operator token, connection limits, node id, advertised address) are refused: use their variables."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for a in var.agent_extra_args : can(regex("^[A-Za-z0-9_.,:=/@+-]+$", a))])
    error_message = "Each element of agent_extra_args must be one argument of [A-Za-z0-9_.,:=/@+-] (no spaces or shell characters)."
  }

  validation {
    condition     = alltrue([for a in var.agent_extra_args : !can(regex("^--(tls-cert|tls-key|sasl-mechanisms|http-require-api-key|operator-token-file|max-connections|max-connections-per-ip|auth-failures-per-minute|node-id|advertised-addr|kafka-addr|http-addr|metadata|metadata-tls-cert|metadata-tls-key|metadata-tls-ca|object-store|zone|roles)(=.*)?$", a))])
    error_message = "agent_extra_args may not set flags the module manages (--tls-cert, --tls-key, --sasl-mechanisms, --http-require-api-key, --operator-token-file, --max-connections, --max-connections-per-ip, --auth-failures-per-minute, --node-id, --advertised-addr, --kafka-addr, --http-addr, --metadata, --metadata-tls-cert, --metadata-tls-key, --metadata-tls-ca, --object-store, --zone, --roles): use the module's variables (agent_fetch_pool for roles)."
  }
}

variable "nlb_deregistration_delay_seconds" {
  description = "Seconds the load balancer keeps draining an agent leaving the group before it is terminated. Agents flush and commit their buffer on SIGTERM well within this."
  type        = number
  default     = 60

  validation {
    condition     = var.nlb_deregistration_delay_seconds >= 0 && var.nlb_deregistration_delay_seconds <= 3600
    error_message = "nlb_deregistration_delay_seconds must be between 0 and 3600."
  }
}

variable "nlb_deletion_protection" {
  description = "Protect the load balancer from deletion (turn off before `terraform destroy`)."
  type        = bool
  default     = true
}

# ---------------------------------------------------------------- metadata nodes

variable "metadata_instance_type" {
  description = "EC2 instance type of the three metadata nodes. The Raft state is small and memory-resident; 2 vCPU / 8 GiB serves hundreds of agents."
  type        = string
  default     = "m7i.large"

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]*\\.[a-z0-9]+$", var.metadata_instance_type))
    error_message = "metadata_instance_type must look like m7i.large."
  }
}

variable "metadata_volume_size_gib" {
  description = "Size of each metadata node's encrypted data volume (Raft log, votes and local snapshots)."
  type        = number
  default     = 50

  validation {
    condition     = var.metadata_volume_size_gib >= 10 && var.metadata_volume_size_gib <= 16384 && floor(var.metadata_volume_size_gib) == var.metadata_volume_size_gib
    error_message = "metadata_volume_size_gib must be a whole number from 10 to 16384."
  }
}

variable "metadata_volume_type" {
  description = "EBS volume type of the metadata data volumes. gp3 suits most clusters; io2 gives lower fsync latency under very high commit rates."
  type        = string
  default     = "gp3"

  validation {
    condition     = contains(["gp3", "io2"], var.metadata_volume_type)
    error_message = "metadata_volume_type must be gp3 or io2."
  }
}

variable "metadata_volume_iops" {
  description = "Provisioned IOPS of each metadata data volume (gp3: 3000-16000, io2: 100-64000; AWS rejects values outside the type's range)."
  type        = number
  default     = 3000

  validation {
    condition     = var.metadata_volume_iops >= 100 && var.metadata_volume_iops <= 64000
    error_message = "metadata_volume_iops must be between 100 and 64000."
  }
}

variable "ebs_kms_key_arn" {
  description = "ARN of a customer-managed KMS key for every EBS volume. Null uses the account's default EBS key (aws/ebs)."
  type        = string
  default     = null

  validation {
    condition     = var.ebs_kms_key_arn == null || can(regex("^arn:aws[a-z-]*:kms:[a-z0-9-]+:[0-9]{12}:key/.+$", var.ebs_kms_key_arn))
    error_message = "ebs_kms_key_arn must be null or a KMS key ARN."
  }
}

# ---------------------------------------------------------------- alarms

variable "alarm_actions" {
  description = "ARNs notified when an alarm fires or clears (typically one SNS topic). Empty creates the alarms without notifications."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for a in var.alarm_actions : can(regex("^arn:aws[a-z-]*:", a))])
    error_message = "alarm_actions must be ARNs."
  }
}

variable "agent_cpu_alarm_percent" {
  description = "Average agent CPU above which the saturation alarm fires (the group is at max size or cannot scale fast enough)."
  type        = number
  default     = 85

  validation {
    condition     = var.agent_cpu_alarm_percent >= 50 && var.agent_cpu_alarm_percent <= 100
    error_message = "agent_cpu_alarm_percent must be between 50 and 100."
  }
}
