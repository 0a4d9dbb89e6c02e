# An internal Network Load Balancer for bootstrap (Kafka 9092, and 9095 for the
# fetch agents with agent_fetch_pool) and the HTTP API (8080). Cross-zone load balancing is off: a client reaches the agents of the
# zone its NLB address lives in, and no load balancer hop crosses a zone
# (inter-AZ traffic is billed, and Floe's design keeps bytes zone-local).
#
# TLS (local.tls_mode):
#   nlb    TLS listeners terminate with var.tls_certificate_arn and forward
#          plaintext to the agents inside the VPC; agents advertise the load
#          balancer, so every Kafka connection goes through it.
#   agent  TCP passthrough: the agents terminate TLS themselves
#          (var.tls_secret_arn), and the health checks use HTTPS.
#   none   TCP passthrough of plaintext (allow_unauthenticated only).
# Unless agents advertise the load balancer, Kafka clients connect to their
# advertised addresses directly after bootstrap, which is why the agent
# security group then admits client CIDRs too.

resource "aws_lb" "this" {
  #checkov:skip=CKV_AWS_152:Cross-zone load balancing is deliberately off: Floe keeps client traffic inside its zone to avoid inter-AZ transfer charges.
  #checkov:skip=CKV_AWS_91:NLB access logs cover TLS listeners only and record connection metadata, no requests; customers who want them set access_logs with their own log bucket.
  name                             = "${var.name}-nlb"
  load_balancer_type               = "network"
  internal                         = true
  subnets                          = var.agent_subnet_ids
  security_groups                  = [aws_security_group.nlb.id]
  enable_cross_zone_load_balancing = false
  enable_deletion_protection       = var.nlb_deletion_protection

  tags = merge(local.tags, { Name = "${var.name}-nlb" })
}

resource "aws_lb_target_group" "agent" {
  for_each             = local.nlb_targets
  name                 = "${var.name}-${each.key}"
  port                 = each.value.port
  protocol             = "TCP"
  target_type          = "instance"
  vpc_id               = var.vpc_id
  deregistration_delay = var.nlb_deregistration_delay_seconds

  # Both target groups follow the agent's readiness: an agent that is not
  # ready (not registered with metadata yet, or draining) gets no new
  # Kafka connections either. /readyz needs no API key; it is served over
  # HTTPS when the agent terminates TLS (the NLB does not verify the
  # certificate of a health check).
  health_check {
    protocol            = local.tls_mode == "agent" ? "HTTPS" : "HTTP"
    port                = tostring(local.http_port)
    path                = "/readyz"
    matcher             = "200"
    interval            = 10
    timeout             = 5
    healthy_threshold   = 2
    unhealthy_threshold = 2
  }

  tags = merge(local.tags, { Name = "${var.name}-${each.key}" })
}

resource "aws_lb_listener" "agent" {
  #checkov:skip=CKV_AWS_2:TCP passthrough, used only without tls_certificate_arn: the agents terminate TLS themselves (tls_secret_arn), or allow_unauthenticated was chosen explicitly. The Kafka protocol is no HTTP(S) listener.
  #checkov:skip=CKV2_AWS_74:TCP passthrough has no TLS policy: TLS, when on, is the agents' own (rustls, TLS 1.2 and 1.3).
  for_each          = local.tls_mode == "nlb" ? {} : aws_lb_target_group.agent
  load_balancer_arn = aws_lb.this.arn
  port              = local.nlb_targets[each.key].listener_port
  protocol          = "TCP"

  default_action {
    type             = "forward"
    target_group_arn = each.value.arn
  }

  tags = merge(local.tags, { Name = "${var.name}-${each.key}" })
}

# With tls_certificate_arn: TLS terminates here, for Kafka and HTTP alike. No
# ALPN policy, so HTTP clients speak HTTP/1.1 to the agent behind it.
resource "aws_lb_listener" "agent_tls" {
  for_each          = local.tls_mode == "nlb" ? aws_lb_target_group.agent : {}
  load_balancer_arn = aws_lb.this.arn
  port              = local.nlb_targets[each.key].listener_port
  protocol          = "TLS"
  certificate_arn   = var.tls_certificate_arn
  ssl_policy        = var.nlb_tls_policy

  default_action {
    type             = "forward"
    target_group_arn = each.value.arn
  }

  tags = merge(local.tags, { Name = "${var.name}-${each.key}-tls" })
}
