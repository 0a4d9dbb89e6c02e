# An internal Network Load Balancer for bootstrap (Kafka 9092) and the HTTP API
# (8080). Cross-zone load balancing is off: a client reaches the agents of the
# zone its NLB address lives in, and no load balancer hop crosses a zone
# (inter-AZ traffic is billed, and Floe's design keeps bytes zone-local).
# After bootstrap, Kafka clients connect to agents' advertised addresses
# directly, which is why the agent security group admits client CIDRs too.

resource "aws_lb" "this" {
  #checkov:skip=CKV_AWS_152:Cross-zone load balancing is deliberately off: Floe keeps client traffic inside its zone to avoid inter-AZ transfer charges.
  #checkov:skip=CKV_AWS_91:Access logs for a TCP NLB record only connection metadata; customers who want them set access_logs with their own log bucket.
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
  for_each             = { kafka = local.kafka_port, http = local.http_port }
  name                 = "${var.name}-${each.key}"
  port                 = each.value
  protocol             = "TCP"
  target_type          = "instance"
  vpc_id               = var.vpc_id
  deregistration_delay = var.nlb_deregistration_delay_seconds

  # Both target groups follow the agent's readiness: an agent that is not
  # ready (not registered with metadata yet, or draining) gets no new
  # Kafka connections either.
  health_check {
    protocol            = "HTTP"
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
  #checkov:skip=CKV_AWS_2:TCP passthrough: the Kafka protocol and Floe's HTTP API are not HTTP(S) listeners on an NLB.
  #checkov:skip=CKV2_AWS_74:TCP passthrough has no TLS policy; traffic stays inside the VPC.
  for_each          = aws_lb_target_group.agent
  load_balancer_arn = aws_lb.this.arn
  port              = each.value.port
  protocol          = "TCP"

  default_action {
    type             = "forward"
    target_group_arn = each.value.arn
  }

  tags = merge(local.tags, { Name = "${var.name}-${each.key}" })
}
