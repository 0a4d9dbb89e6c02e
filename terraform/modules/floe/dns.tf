# Stable private names for the metadata nodes: agents and peers address them as
# <name>-metadata-N.<zone>:9093, so replacing an instance (new IP) only moves a
# DNS record, and no flag on any other machine changes.

resource "aws_route53_zone" "this" {
  #checkov:skip=CKV2_AWS_38:DNSSEC signing is not supported for private hosted zones.
  #checkov:skip=CKV2_AWS_39:Query logging is not supported for private hosted zones (use Resolver query logging on the VPC if needed).
  count   = var.existing_dns_zone_id == null ? 1 : 0
  name    = var.dns_zone_name
  comment = "Floe ${var.name}: metadata node names"

  vpc {
    vpc_id = var.vpc_id
  }

  tags = merge(local.tags, { Name = var.dns_zone_name })
}

resource "aws_route53_record" "metadata" {
  for_each = local.metadata_nodes
  zone_id  = local.dns_zone_id
  name     = each.value.fqdn
  type     = "A"
  ttl      = 30
  records  = [aws_instance.metadata[each.key].private_ip]
}

# The client endpoint's name (client_endpoint_dns_name), when the module owns
# the record: an alias of the NLB, so it follows the load balancer's addresses.
resource "aws_route53_record" "endpoint" {
  count   = var.client_endpoint_zone_id == null ? 0 : 1
  zone_id = var.client_endpoint_zone_id
  name    = var.client_endpoint_dns_name
  type    = "A"

  alias {
    name                   = aws_lb.this.dns_name
    zone_id                = aws_lb.this.zone_id
    evaluate_target_health = true
  }

  lifecycle {
    precondition {
      condition     = var.client_endpoint_dns_name != null
      error_message = "client_endpoint_zone_id needs client_endpoint_dns_name, the name of the record to create."
    }
  }
}
