output "bootstrap_servers" {
  description = "Kafka bootstrap.servers for clients."
  value       = module.floe.bootstrap_servers
}

output "http_endpoint" {
  description = "Base URL of Floe's HTTP API."
  value       = module.floe.http_endpoint
}

output "bucket_name" {
  description = "S3 bucket holding Floe's data."
  value       = module.floe.bucket_name
}

output "object_store_url" {
  description = "The s3://bucket/prefix URL Floe uses."
  value       = module.floe.object_store_url
}

output "role_arn" {
  description = "IAM role of the Floe instances."
  value       = module.floe.role_arn
}

output "metadata_endpoints" {
  description = "Stable metadata node addresses."
  value       = module.floe.metadata_endpoints
}

output "metadata_instance_ids" {
  description = "EC2 instance IDs of the metadata nodes, by node id (for Session Manager)."
  value       = module.floe.metadata_instance_ids
}

output "metadata_tls_operator_secret_arn" {
  description = "Secrets Manager secret with the operator certificate, key and CA for floe admin (null without metadata_mtls)."
  value       = module.floe.metadata_tls_operator_secret_arn
}

output "autoscaling_group_name" {
  description = "Agent autoscaling group (for instance refreshes)."
  value       = module.floe.autoscaling_group_name
}

output "prometheus_scrape_config" {
  description = "Prometheus scrape_configs entry for the agents."
  value       = module.floe.prometheus_scrape_config
}
