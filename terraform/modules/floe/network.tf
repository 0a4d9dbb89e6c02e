# Security groups and the S3 gateway endpoint.
#
# Ingress, all of it:
#   clients (var.client_cidr_blocks)   -> NLB: 9092 (Kafka), 8080 (HTTP)
#                                      -> agents: 9092, 8080, unless agents
#                                         advertise the load balancer (always
#                                         so with TLS on the NLB, where the
#                                         agents speak plaintext)
#   monitoring (var.monitoring_cidr_blocks) -> agents: 8080 (/metrics)
#   monitoring (var.monitoring_cidr_blocks) -> metadata nodes: 9094 (/metrics)
#   NLB                                -> agents: 9092, 8080 (traffic and health checks)
#   agents, metadata nodes             -> metadata nodes: 9093
# Nothing is open to 0.0.0.0/0, and no SSH port exists (use Session Manager).
# The metadata port runs mutual TLS (metadata_mtls, on by default); these
# rules are a second line, and the only one with metadata_mtls = false: only
# the agent and metadata groups reach it. Egress is HTTPS (S3 through the gateway endpoint, Secrets Manager,
# SSM, the binary download) plus the metadata port inside the cluster.

resource "aws_security_group" "nlb" {
  name        = "${var.name}-nlb"
  description = "Floe load balancer: Kafka and HTTP from client CIDRs"
  vpc_id      = var.vpc_id

  tags = merge(local.tags, { Name = "${var.name}-nlb" })
}

resource "aws_security_group" "agent" {
  name        = "${var.name}-agent"
  description = "Floe agents: Kafka and HTTP from clients and the NLB"
  vpc_id      = var.vpc_id

  tags = merge(local.tags, { Name = "${var.name}-agent" })
}

resource "aws_security_group" "metadata" {
  name        = "${var.name}-metadata"
  description = "Floe metadata nodes: port 9093 from agents and peers only"
  vpc_id      = var.vpc_id

  tags = merge(local.tags, { Name = "${var.name}-metadata" })
}

locals {
  # Every (CIDR, port) pair clients may reach.
  client_ingress = merge([
    for cidr in var.client_cidr_blocks : {
      for name, port in { kafka = local.kafka_port, http = local.http_port } :
      "${name}-${cidr}" => { cidr = cidr, port = port, name = name }
    }
  ]...)
  # And the load balancer's listeners (the fetch agents' bootstrap too).
  nlb_client_ingress = merge([
    for cidr in var.client_cidr_blocks : {
      for name, target in local.nlb_targets :
      "${name}-${cidr}" => { cidr = cidr, port = target.listener_port, name = name }
    }
  ]...)
}

# ---------------------------------------------------------------- NLB

resource "aws_vpc_security_group_ingress_rule" "nlb_clients" {
  for_each          = local.nlb_client_ingress
  security_group_id = aws_security_group.nlb.id
  description       = "${each.value.name} from client ${each.value.cidr}"
  ip_protocol       = "tcp"
  from_port         = each.value.port
  to_port           = each.value.port
  cidr_ipv4         = each.value.cidr

  tags = merge(local.tags, { Name = "${var.name}-nlb-${each.key}" })
}

resource "aws_vpc_security_group_egress_rule" "nlb_to_agents" {
  for_each                     = { kafka = local.kafka_port, http = local.http_port }
  security_group_id            = aws_security_group.nlb.id
  description                  = "${each.key} to agents (traffic and health checks)"
  ip_protocol                  = "tcp"
  from_port                    = each.value
  to_port                      = each.value
  referenced_security_group_id = aws_security_group.agent.id

  tags = merge(local.tags, { Name = "${var.name}-nlb-to-agents-${each.key}" })
}

# ---------------------------------------------------------------- agents

# Clients that connect to agents' advertised addresses after bootstrap. None
# do when agents advertise the load balancer.
resource "aws_vpc_security_group_ingress_rule" "agent_clients" {
  for_each          = local.advertised_address == "load_balancer" ? {} : local.client_ingress
  security_group_id = aws_security_group.agent.id
  description       = "${each.value.name} from client ${each.value.cidr} (direct connections after bootstrap)"
  ip_protocol       = "tcp"
  from_port         = each.value.port
  to_port           = each.value.port
  cidr_ipv4         = each.value.cidr

  tags = merge(local.tags, { Name = "${var.name}-agent-${each.key}" })
}

resource "aws_vpc_security_group_ingress_rule" "agent_from_nlb" {
  for_each                     = { kafka = local.kafka_port, http = local.http_port }
  security_group_id            = aws_security_group.agent.id
  description                  = "${each.key} from the load balancer"
  ip_protocol                  = "tcp"
  from_port                    = each.value
  to_port                      = each.value
  referenced_security_group_id = aws_security_group.nlb.id

  tags = merge(local.tags, { Name = "${var.name}-agent-from-nlb-${each.key}" })
}

# Fetch agents ask each other for object blocks (one S3 GET per block per
# zone); only agents reach the peer port.
resource "aws_vpc_security_group_ingress_rule" "agent_from_agents" {
  security_group_id            = aws_security_group.agent.id
  description                  = "block requests between agents"
  ip_protocol                  = "tcp"
  from_port                    = local.peer_port
  to_port                      = local.peer_port
  referenced_security_group_id = aws_security_group.agent.id

  tags = merge(local.tags, { Name = "${var.name}-agent-from-agents" })
}

resource "aws_vpc_security_group_ingress_rule" "agent_monitoring" {
  for_each          = toset(var.monitoring_cidr_blocks)
  security_group_id = aws_security_group.agent.id
  description       = "metrics scrape from ${each.value}"
  ip_protocol       = "tcp"
  from_port         = local.http_port
  to_port           = local.http_port
  cidr_ipv4         = each.value

  tags = merge(local.tags, { Name = "${var.name}-agent-monitoring-${each.value}" })
}

resource "aws_vpc_security_group_ingress_rule" "metadata_monitoring" {
  for_each          = toset(var.monitoring_cidr_blocks)
  security_group_id = aws_security_group.metadata.id
  description       = "metrics scrape from ${each.value}"
  ip_protocol       = "tcp"
  from_port         = local.metadata_metrics_port
  to_port           = local.metadata_metrics_port
  cidr_ipv4         = each.value

  tags = merge(local.tags, { Name = "${var.name}-metadata-monitoring-${each.value}" })
}

resource "aws_vpc_security_group_egress_rule" "agent_https" {
  security_group_id = aws_security_group.agent.id
  description       = "HTTPS: S3 (gateway endpoint), Secrets Manager, SSM, binary download"
  ip_protocol       = "tcp"
  from_port         = 443
  to_port           = 443
  cidr_ipv4         = "0.0.0.0/0"

  tags = merge(local.tags, { Name = "${var.name}-agent-https" })
}

resource "aws_vpc_security_group_egress_rule" "agent_to_metadata" {
  security_group_id            = aws_security_group.agent.id
  description                  = "metadata API"
  ip_protocol                  = "tcp"
  from_port                    = local.metadata_port
  to_port                      = local.metadata_port
  referenced_security_group_id = aws_security_group.metadata.id

  tags = merge(local.tags, { Name = "${var.name}-agent-to-metadata" })
}

resource "aws_vpc_security_group_egress_rule" "agent_to_agents" {
  security_group_id            = aws_security_group.agent.id
  description                  = "block requests to other agents' peer listeners"
  ip_protocol                  = "tcp"
  from_port                    = local.peer_port
  to_port                      = local.peer_port
  referenced_security_group_id = aws_security_group.agent.id

  tags = merge(local.tags, { Name = "${var.name}-agent-to-agents" })
}

# ---------------------------------------------------------------- metadata nodes

resource "aws_vpc_security_group_ingress_rule" "metadata_from_agents" {
  security_group_id            = aws_security_group.metadata.id
  description                  = "metadata API from agents"
  ip_protocol                  = "tcp"
  from_port                    = local.metadata_port
  to_port                      = local.metadata_port
  referenced_security_group_id = aws_security_group.agent.id

  tags = merge(local.tags, { Name = "${var.name}-metadata-from-agents" })
}

resource "aws_vpc_security_group_ingress_rule" "metadata_from_peers" {
  security_group_id            = aws_security_group.metadata.id
  description                  = "Raft and metadata API between metadata nodes"
  ip_protocol                  = "tcp"
  from_port                    = local.metadata_port
  to_port                      = local.metadata_port
  referenced_security_group_id = aws_security_group.metadata.id

  tags = merge(local.tags, { Name = "${var.name}-metadata-from-peers" })
}

resource "aws_vpc_security_group_egress_rule" "metadata_https" {
  security_group_id = aws_security_group.metadata.id
  description       = "HTTPS: S3 (gateway endpoint), SSM, binary download"
  ip_protocol       = "tcp"
  from_port         = 443
  to_port           = 443
  cidr_ipv4         = "0.0.0.0/0"

  tags = merge(local.tags, { Name = "${var.name}-metadata-https" })
}

resource "aws_vpc_security_group_egress_rule" "metadata_to_peers" {
  security_group_id            = aws_security_group.metadata.id
  description                  = "Raft between metadata nodes"
  ip_protocol                  = "tcp"
  from_port                    = local.metadata_port
  to_port                      = local.metadata_port
  referenced_security_group_id = aws_security_group.metadata.id

  tags = merge(local.tags, { Name = "${var.name}-metadata-to-peers" })
}

# ---------------------------------------------------------------- S3 endpoint

# Object traffic stays on the AWS network: no NAT gateway processing charge and
# no internet path. No endpoint policy is set on purpose: the endpoint serves
# every workload on these route tables, and the Floe bucket is already locked
# down by its own policy.
resource "aws_vpc_endpoint" "s3" {
  count             = var.create_s3_gateway_endpoint ? 1 : 0
  vpc_id            = var.vpc_id
  service_name      = "com.amazonaws.${local.region}.s3"
  vpc_endpoint_type = "Gateway"
  route_table_ids   = var.route_table_ids

  tags = merge(local.tags, { Name = "${var.name}-s3" })
}
