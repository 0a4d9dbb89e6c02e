output "bootstrap_servers" {
  description = "Kafka bootstrap address: client_endpoint_dns_name, else the internal NLB's name. Clients then connect to the agents' advertised addresses (the same address when agents advertise load_balancer)."
  value       = "${local.endpoint_host}:${local.kafka_port}"
}

output "http_endpoint" {
  description = "Base URL of Floe's HTTP API (produce/consume, operator API, /healthz, /readyz, /metrics) through the NLB: https:// unless allow_unauthenticated without TLS."
  value       = "${local.tls_mode == "none" ? "http" : "https"}://${local.endpoint_host}:${local.http_port}"
}

output "kafka_security_protocol" {
  description = "The security.protocol Kafka clients need: SASL_SSL by default, SSL (TLS without SASL) or PLAINTEXT with allow_unauthenticated."
  value       = var.allow_unauthenticated ? (local.tls_mode == "none" ? "PLAINTEXT" : "SSL") : "SASL_SSL"
}

output "agent_advertised_address" {
  description = "What the agents advertise to Kafka clients: private_ip, private_dns or load_balancer (every Kafka connection through the NLB)."
  value       = local.advertised_address
}

output "nlb_dns_name" {
  description = "DNS name of the internal Network Load Balancer."
  value       = aws_lb.this.dns_name
}

output "bucket_name" {
  description = "Name of the S3 bucket holding Floe's data."
  value       = aws_s3_bucket.this.id
}

output "bucket_arn" {
  description = "ARN of the S3 bucket holding Floe's data."
  value       = aws_s3_bucket.this.arn
}

output "object_store_url" {
  description = "The --object-store URL every Floe process uses (s3://bucket/prefix)."
  value       = local.object_store_url
}

output "role_arn" {
  description = "ARN of the IAM role the agents run as."
  value       = aws_iam_role.floe.arn
}

output "instance_profile_name" {
  description = "Name of the instance profile wrapping role_arn."
  value       = aws_iam_instance_profile.floe.name
}

output "metadata_role_arn" {
  description = "ARN of the IAM role the metadata nodes run as (the same object-store access as role_arn, other secrets)."
  value       = aws_iam_role.metadata.arn
}

output "metadata_endpoints" {
  description = "Stable metadata addresses (host:9093), in node-id order: the value of `floe agent --metadata`."
  value       = [for id, n in local.metadata_nodes : "${n.fqdn}:${local.metadata_port}"]
}

output "metadata_tls_operator_secret_arn" {
  description = "ARN of the Secrets Manager secret holding the operator's certificate for the metadata port (spiffe://TRUST_DOMAIN/floe/operator/admin), as JSON {\"cert\", \"key\", \"ca\"}: the files of `floe admin --metadata-tls-cert --metadata-tls-key --metadata-tls-ca`. No instance role may read it; read it with your own credentials. Null with metadata_mtls = false."
  value       = var.metadata_mtls ? aws_secretsmanager_secret.metadata_tls["operator"].arn : null
}

output "metadata_tls_ca_cert_pem" {
  description = "The metadata port's cluster CA certificate (PEM), which every metadata certificate is signed by. Null with metadata_mtls = false."
  value       = local.metadata_tls_ca_cert_pem
}

output "metadata_tls_trust_domain" {
  description = "SPIFFE trust domain of the metadata port's certificates (<name>.<dns_zone_name>). Null with metadata_mtls = false."
  value       = var.metadata_mtls ? local.metadata_trust_domain : null
}

output "metadata_instance_ids" {
  description = "EC2 instance IDs of the metadata nodes, keyed by node id."
  value       = { for id, i in aws_instance.metadata : id => i.id }
}

output "autoscaling_group_name" {
  description = "Name of the (main) agent autoscaling group (for instance refreshes)."
  value       = aws_autoscaling_group.agent["main"].name
}

output "fetch_autoscaling_group_name" {
  description = "Name of the fetch agents' autoscaling group (agent_fetch_pool), or null."
  value       = try(aws_autoscaling_group.agent["fetch"].name, null)
}

output "fetch_bootstrap_servers" {
  description = "Kafka bootstrap for consumers that should read through the fetch agents (agent_fetch_pool), or null."
  value       = var.agent_fetch_pool == null ? null : "${local.endpoint_host}:${local.fetch_bootstrap_port}"
}

output "agent_security_group_id" {
  description = "Security group of the agents."
  value       = aws_security_group.agent.id
}

output "metadata_security_group_id" {
  description = "Security group of the metadata nodes."
  value       = aws_security_group.metadata.id
}

output "prometheus_scrape_config" {
  description = "Prometheus scrape_configs entries (YAML): the agents, discovered through EC2 tags, on port 8080, and the metadata nodes on port 9094 (plain HTTP; metrics only). Agents are scraped over HTTPS when the agents terminate TLS (add a tls_config with ca_file and server_name if their certificate is not from a CA Prometheus trusts or does not name their addresses). The Prometheus server needs ec2:DescribeInstances and must sit in monitoring_cidr_blocks (or client_cidr_blocks, unless agents advertise the load balancer)."
  value = yamlencode({
    scrape_configs = [{
      job_name        = "${var.name}-agents"
      metrics_path    = "/metrics"
      scheme          = local.tls_mode == "agent" ? "https" : "http"
      scrape_interval = "15s"
      ec2_sd_configs = [{
        region = local.region
        port   = local.http_port
        filters = [
          { name = "tag:floe:cluster", values = [var.name] },
          { name = "tag:floe:role", values = ["agent"] },
          { name = "instance-state-name", values = ["running"] },
        ]
      }]
      relabel_configs = [
        { source_labels = ["__meta_ec2_private_ip"], regex = "(.+)", replacement = "$${1}:${local.http_port}", target_label = "__address__" },
        { source_labels = ["__meta_ec2_availability_zone"], target_label = "zone" },
        { source_labels = ["__meta_ec2_instance_id"], target_label = "instance_id" },
      ]
      }, {
      job_name        = "${var.name}-metadata"
      metrics_path    = "/metrics"
      scheme          = "http"
      scrape_interval = "15s"
      static_configs  = [{ targets = [for id, n in local.metadata_nodes : "${n.fqdn}:${local.metadata_metrics_port}"] }]
    }]
  })
}
