variable "region" {
  description = "AWS region of the customer VPC."
  type        = string

  validation {
    condition     = can(regex("^[a-z]{2}(-gov)?-[a-z]+-[0-9]$", var.region))
    error_message = "region must be an AWS region name such as eu-west-1."
  }
}

variable "name" {
  description = "Cluster name, used as a prefix for every resource."
  type        = string
  default     = "floe"

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{1,23}$", var.name))
    error_message = "name must be 2-24 characters of [a-z0-9-], starting with a letter."
  }
}

variable "vpc_id" {
  description = "ID of the VPC to deploy into."
  type        = string

  validation {
    condition     = can(regex("^vpc-[0-9a-f]{8,17}$", var.vpc_id))
    error_message = "vpc_id must look like vpc-0123456789abcdef0."
  }
}

variable "private_subnet_ids" {
  description = "Private subnets in three or more availability zones. The first three host the metadata nodes; all of them host agents and the load balancer."
  type        = list(string)

  validation {
    condition     = length(var.private_subnet_ids) >= 3 && alltrue([for s in var.private_subnet_ids : can(regex("^subnet-[0-9a-f]{8,17}$", s))])
    error_message = "private_subnet_ids must hold at least 3 subnet IDs."
  }
}

variable "private_route_table_ids" {
  description = "Route tables of the private subnets (they get the S3 gateway endpoint)."
  type        = list(string)

  validation {
    condition     = length(var.private_route_table_ids) >= 1 && alltrue([for r in var.private_route_table_ids : can(regex("^rtb-[0-9a-f]{8,17}$", r))])
    error_message = "private_route_table_ids must hold at least one route table ID."
  }
}

variable "client_cidr_blocks" {
  description = "IPv4 CIDRs of the Kafka and HTTP clients. 0.0.0.0/0 is refused."
  type        = list(string)

  validation {
    condition     = length(var.client_cidr_blocks) >= 1 && alltrue([for c in var.client_cidr_blocks : can(cidrnetmask(c)) && c != "0.0.0.0/0"])
    error_message = "client_cidr_blocks must hold valid IPv4 CIDRs other than 0.0.0.0/0."
  }
}

variable "allow_unauthenticated" {
  description = "Run without TLS, SASL and API keys (anyone in client_cidr_blocks reads and writes every topic). Leave false and set one of the TLS variables."
  type        = bool
  default     = false
}

variable "metadata_mtls" {
  description = "Mutual TLS on the metadata port, with certificates the module makes (their private keys live in the Terraform state: keep it encrypted). False runs the port in plaintext, reachable from the cluster's own security groups only."
  type        = bool
  default     = true
}

variable "tls_certificate_arn" {
  description = "ACM certificate for client_endpoint_dns_name; the load balancer terminates TLS with it. Set this or tls_secret_arn."
  type        = string
  default     = null

  validation {
    condition     = var.tls_certificate_arn == null || can(regex("^arn:aws[a-z-]*:acm:[a-z0-9-]+:[0-9]{12}:certificate/[0-9a-f-]+$", var.tls_certificate_arn))
    error_message = "tls_certificate_arn must be null or an ACM certificate ARN."
  }
}

variable "tls_secret_arn" {
  description = "Full ARN of a Secrets Manager secret holding JSON {\"cert\": PEM, \"key\": PEM}; the agents terminate TLS with it. Set this or tls_certificate_arn."
  type        = string
  default     = null

  validation {
    condition     = var.tls_secret_arn == null || can(regex("^arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:[0-9]{12}:secret:[A-Za-z0-9/_+=.@-]+-[A-Za-z0-9]{6}$", var.tls_secret_arn))
    error_message = "tls_secret_arn must be null or the full ARN of a Secrets Manager secret (with its 6-character suffix)."
  }
}

variable "operator_token_secret_arn" {
  description = "Full ARN of a Secrets Manager secret holding the operator token (24+ characters) for the HTTP operator API. Null: no operator API."
  type        = string
  default     = null

  validation {
    condition     = var.operator_token_secret_arn == null || can(regex("^arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:[0-9]{12}:secret:[A-Za-z0-9/_+=.@-]+-[A-Za-z0-9]{6}$", var.operator_token_secret_arn))
    error_message = "operator_token_secret_arn must be null or the full ARN of a Secrets Manager secret (with its 6-character suffix)."
  }
}

variable "client_endpoint_dns_name" {
  description = "DNS name clients connect to, covered by the TLS certificate (required with tls_certificate_arn), e.g. kafka.example.com."
  type        = string
  default     = null

  validation {
    condition     = var.client_endpoint_dns_name == null || can(regex("^([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\\.)+[a-z]{2,63}$", var.client_endpoint_dns_name))
    error_message = "client_endpoint_dns_name must be null or a lowercase DNS name."
  }
}

variable "client_endpoint_zone_id" {
  description = "Route 53 hosted zone in which to create client_endpoint_dns_name as an alias of the load balancer. Null: create the record yourself."
  type        = string
  default     = null

  validation {
    condition     = var.client_endpoint_zone_id == null || can(regex("^Z[0-9A-Z]{1,31}$", var.client_endpoint_zone_id))
    error_message = "client_endpoint_zone_id must be null or a hosted zone ID."
  }
}

variable "max_connections_per_ip" {
  description = "Kafka connections one client address may hold on one agent (raise it for clients behind a NAT gateway)."
  type        = number
  default     = 1000

  validation {
    condition     = var.max_connections_per_ip >= 1 && floor(var.max_connections_per_ip) == var.max_connections_per_ip
    error_message = "max_connections_per_ip must be a whole number of at least 1."
  }
}

variable "floe_binary_source" {
  description = "https:// URL or s3://bucket/key of the floe Linux binary."
  type        = string

  validation {
    condition     = can(regex("^(https|s3)://", var.floe_binary_source))
    error_message = "floe_binary_source must start with https:// or s3://."
  }
}

variable "floe_binary_sha256" {
  description = "SHA-256 of the floe binary (hex); boot fails on a mismatch."
  type        = string
  default     = null

  validation {
    condition     = var.floe_binary_sha256 == null || can(regex("^[0-9a-f]{64}$", var.floe_binary_sha256))
    error_message = "floe_binary_sha256 must be null or 64 lowercase hex characters."
  }
}

variable "architecture" {
  description = "CPU architecture of the instances and the binary."
  type        = string
  default     = "x86_64"

  validation {
    condition     = contains(["x86_64", "arm64"], var.architecture)
    error_message = "architecture must be x86_64 or arm64."
  }
}

variable "agent_min_size" {
  description = "Minimum number of agents (at least one per zone)."
  type        = number
  default     = 3

  validation {
    condition     = var.agent_min_size >= 1 && floor(var.agent_min_size) == var.agent_min_size
    error_message = "agent_min_size must be a whole number of at least 1."
  }
}

variable "agent_max_size" {
  description = "Maximum number of agents."
  type        = number
  default     = 12

  validation {
    condition     = var.agent_max_size >= 1 && floor(var.agent_max_size) == var.agent_max_size
    error_message = "agent_max_size must be a whole number of at least 1."
  }
}

variable "alarm_actions" {
  description = "ARNs (e.g. an SNS topic) notified by the CloudWatch alarms."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for a in var.alarm_actions : can(regex("^arn:aws[a-z-]*:", a))])
    error_message = "alarm_actions must be ARNs."
  }
}

variable "nlb_deletion_protection" {
  description = "Protect the load balancer from deletion; set to false before terraform destroy."
  type        = bool
  default     = true
}

variable "tags" {
  description = "Tags merged into every taggable resource of the cluster (cost allocation, ownership)."
  type        = map(string)
  default = {
    "managed-by" = "terraform"
    "app"        = "floe"
  }

  validation {
    condition     = alltrue([for k in keys(var.tags) : !startswith(lower(k), "aws:")])
    error_message = "Tag keys may not start with aws:."
  }
}
