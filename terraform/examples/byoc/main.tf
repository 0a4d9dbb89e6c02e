# Example root module: one Floe cluster in an existing VPC. Copy this
# directory, fill in terraform.tfvars (see terraform.tfvars.example) and apply.
#
# The state holds private keys: with metadata_mtls (the default) the module
# makes the metadata port's CA and certificates with the tls provider, which
# keeps their keys in the state, unencrypted. Use a backend that encrypts the
# state and that only those who may apply can read (see README.md).

# No provider default_tags: the module merges var.tags into every taggable
# resource itself, including what default_tags cannot reach (instances and
# volumes launched by the autoscaling group, tagged through the launch
# template and the group's propagated tags).
provider "aws" {
  region = var.region
}

module "floe" {
  source = "../../modules/floe"

  name                = var.name
  vpc_id              = var.vpc_id
  agent_subnet_ids    = var.private_subnet_ids
  metadata_subnet_ids = slice(var.private_subnet_ids, 0, 3)
  route_table_ids     = var.private_route_table_ids
  client_cidr_blocks  = var.client_cidr_blocks

  # Encrypted and authenticated unless allow_unauthenticated: one of the two
  # TLS variables is required (docs/DEPLOYMENT.md, "Encryption and
  # authentication").
  allow_unauthenticated     = var.allow_unauthenticated
  tls_certificate_arn       = var.tls_certificate_arn
  tls_secret_arn            = var.tls_secret_arn
  operator_token_secret_arn = var.operator_token_secret_arn
  client_endpoint_dns_name  = var.client_endpoint_dns_name
  client_endpoint_zone_id   = var.client_endpoint_zone_id
  max_connections_per_ip    = var.max_connections_per_ip

  # Mutual TLS on the metadata port (docs/SECURITY.md).
  metadata_mtls = var.metadata_mtls

  floe_binary_source = var.floe_binary_source
  floe_binary_sha256 = var.floe_binary_sha256
  architecture       = var.architecture

  agent_min_size = var.agent_min_size
  agent_max_size = var.agent_max_size
  alarm_actions  = var.alarm_actions

  nlb_deletion_protection = var.nlb_deletion_protection

  tags = var.tags
}
