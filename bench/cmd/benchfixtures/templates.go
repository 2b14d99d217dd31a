package main

import (
	"crypto/sha256"
	"fmt"
)

// smallPod is a typical single-container Pod created by a user, a little
// richer than the captured sample (labels, a config volume, probes); its
// metadata has no annotations, so injecting one creates the map.
func smallPod() podTemplate {
	return podTemplate{
		labels: map[string]string{"app": "web", "tier": "frontend"},
		containers: []container{{
			name:  "web",
			image: "nginx:1.27.3",
			ports: []int{8080},
			env: []envVar{
				{name: "LOG_LEVEL", value: "info"},
				{name: "POD_NAME", from: "fieldRef", fromName: "metadata.name"},
			},
			cpu:    "250m",
			memory: "256Mi",
			mounts: []mount{{name: "config", path: "/etc/nginx/conf.d", readOnly: true}},
			probes: true,
		}},
		volumes: []volume{{name: "config", kind: "configMap", source: "web-config"}},
	}
}

// largePod is a big data-pipeline Pod: many containers, each with many
// environment variables, mounts and probes, many labels and annotations,
// and many volumes. Its metadata already has annotations, so injecting one
// adds a key to an existing map.
func largePod() podTemplate {
	var containers []container
	names := []string{"ingest", "transform", "enrich", "aggregate", "export", "log-shipper"}
	for i, name := range names {
		containers = append(containers, pipelineContainer(name, i))
	}
	inits := []container{
		{name: "migrate-schema", image: "registry.example.com/analytics/migrate:4.12.0",
			command: []string{"/bin/migrate"}, args: []string{"--database=$(POSTGRES_DB)", "--wait=60s", "up"},
			env: pipelineEnv("migrate")[:8], cpu: "100m", memory: "128Mi",
			mounts: []mount{{name: "migrations", path: "/migrations", readOnly: true}}, security: true},
		{name: "fetch-models", image: "registry.example.com/analytics/fetch:1.3.2",
			args: []string{"--source=s3://analytics-models/prod", "--dest=/models"},
			env:  pipelineEnv("fetch")[8:16], cpu: "200m", memory: "256Mi",
			mounts: []mount{{name: "models", path: "/models"}}, security: true},
	}
	volumes := []volume{
		{name: "pipeline-config", kind: "configMap", source: "analytics-pipeline-config"},
		{name: "feature-flags", kind: "configMap", source: "analytics-feature-flags"},
		{name: "migrations", kind: "configMap", source: "analytics-migrations"},
		{name: "log-shipper-config", kind: "configMap", source: "analytics-log-shipper"},
		{name: "tls", kind: "secret", source: "analytics-pipeline-tls"},
		{name: "kafka-credentials", kind: "secret", source: "analytics-kafka-credentials"},
		{name: "s3-credentials", kind: "secret", source: "analytics-s3-credentials"},
		{name: "models", kind: "emptyDir"},
		{name: "scratch", kind: "emptyDir"},
		{name: "spool", kind: "emptyDir"},
		{name: "tmp", kind: "emptyDir"},
	}
	return podTemplate{
		labels: map[string]string{
			"app":                          "analytics-pipeline",
			"app.kubernetes.io/name":       "analytics-pipeline",
			"app.kubernetes.io/instance":   "analytics-pipeline-prod",
			"app.kubernetes.io/version":    "7.4.1",
			"app.kubernetes.io/component":  "stream-processor",
			"app.kubernetes.io/part-of":    "analytics-platform",
			"app.kubernetes.io/managed-by": "kubectl",
			"team":                         "data-platform",
			"cost-center":                  "cc-4711",
			"environment":                  "production",
			"tier":                         "batch",
		},
		annotations: map[string]string{
			"prometheus.io/scrape":                           "true",
			"prometheus.io/port":                             "9102",
			"prometheus.io/path":                             "/metrics",
			"sidecar.istio.io/inject":                        "false",
			"kubectl.kubernetes.io/default-container":        "ingest",
			"cluster-autoscaler.kubernetes.io/safe-to-evict": "false",
			"checksum/config":                                checksum("config"),
			"checksum/secrets":                               checksum("secrets"),
			"checksum/feature-flags":                         checksum("feature-flags"),
			"fluentbit.io/parser":                            "json",
			"fluentbit.io/exclude-log-shipper":               "true",
			"ad.datadoghq.com/ingest.logs":                   `[{"source":"analytics","service":"ingest","log_processing_rules":[{"type":"multi_line","name":"stack_traces","pattern":"^\\d{4}-\\d{2}-\\d{2}"}]}]`,
			"ad.datadoghq.com/transform.logs":                `[{"source":"analytics","service":"transform"}]`,
			"ad.datadoghq.com/export.logs":                   `[{"source":"analytics","service":"export"}]`,
			"example.com/owner":                              "data-platform@example.com",
			"example.com/runbook":                            "https://runbooks.example.com/analytics/pipeline",
			"example.com/git-commit":                         "9f2c4e1b7a3d5f6e8c0b1a2d3e4f5a6b7c8d9e0f",
			"example.com/build-url":                          "https://ci.example.com/analytics/pipeline/builds/18342",
			"example.com/description":                        "Streaming pipeline that ingests click events from Kafka, transforms and enriches them with customer and product data, aggregates them in five-minute windows and exports the results to S3 and the warehouse.",
		},
		initContainers: inits,
		containers:     containers,
		volumes:        volumes,
		nodeSelector:   map[string]string{"node.kubernetes.io/instance-type": "m6i.4xlarge", "topology.kubernetes.io/zone": "eu-west-1a"},
		priorityClass:  "batch-high",
		serviceAccount: "analytics-pipeline",
	}
}

// pipelineContainer is container i of the large Pod.
func pipelineContainer(name string, i int) container {
	c := container{
		name:   name,
		image:  fmt.Sprintf("registry.example.com/analytics/%s:7.4.1", name),
		args:   []string{"--config=/etc/pipeline/config.yaml", fmt.Sprintf("--stage=%s", name), "--metrics-addr=:9102"},
		ports:  []int{8080 + i, 9102},
		env:    pipelineEnv(name),
		cpu:    fmt.Sprintf("%dm", 250*(1+i%3)),
		memory: fmt.Sprintf("%dMi", 512*(1+i%2)),
		mounts: []mount{
			{name: "pipeline-config", path: "/etc/pipeline", readOnly: true},
			{name: "feature-flags", path: "/etc/feature-flags", readOnly: true},
			{name: "tls", path: "/etc/tls", readOnly: true},
			{name: "scratch", path: "/scratch"},
			{name: "tmp", path: "/tmp"},
		},
		probes:   true,
		security: true,
	}
	return c
}

// pipelineEnv is the environment of a pipeline container.
func pipelineEnv(stage string) []envVar {
	return []envVar{
		{name: "APP_ENV", value: "production"},
		{name: "LOG_LEVEL", value: "info"},
		{name: "LOG_FORMAT", value: "json"},
		{name: "PIPELINE_STAGE", value: stage},
		{name: "KAFKA_BROKERS", value: "kafka-0.kafka.data.svc:9092,kafka-1.kafka.data.svc:9092,kafka-2.kafka.data.svc:9092"},
		{name: "KAFKA_TOPIC_IN", value: "clickstream.raw.v3"},
		{name: "KAFKA_TOPIC_OUT", value: "clickstream." + stage + ".v3"},
		{name: "KAFKA_CONSUMER_GROUP", value: "analytics-pipeline-" + stage},
		{name: "KAFKA_PASSWORD", from: "secretKeyRef", fromName: "analytics-kafka-credentials", fromKey: "password"},
		{name: "SCHEMA_REGISTRY_URL", value: "http://schema-registry.data.svc:8081"},
		{name: "REDIS_ADDR", value: "redis-master.cache.svc:6379"},
		{name: "POSTGRES_HOST", value: "analytics-db.data.svc"},
		{name: "POSTGRES_DB", value: "analytics"},
		{name: "POSTGRES_USER", value: "pipeline"},
		{name: "POSTGRES_PASSWORD", from: "secretKeyRef", fromName: "analytics-db-credentials", fromKey: "password"},
		{name: "S3_BUCKET", value: "analytics-prod-exports"},
		{name: "AWS_REGION", value: "eu-west-1"},
		{name: "AWS_ACCESS_KEY_ID", from: "secretKeyRef", fromName: "analytics-s3-credentials", fromKey: "access-key-id"},
		{name: "AWS_SECRET_ACCESS_KEY", from: "secretKeyRef", fromName: "analytics-s3-credentials", fromKey: "secret-access-key"},
		{name: "FEATURE_FLAGS", from: "configMapKeyRef", fromName: "analytics-feature-flags", fromKey: "flags"},
		{name: "OTEL_EXPORTER_OTLP_ENDPOINT", value: "http://otel-collector.observability.svc:4317"},
		{name: "OTEL_SERVICE_NAME", value: "analytics-pipeline-" + stage},
		{name: "POD_NAME", from: "fieldRef", fromName: "metadata.name"},
		{name: "POD_NAMESPACE", from: "fieldRef", fromName: "metadata.namespace"},
		{name: "NODE_NAME", from: "fieldRef", fromName: "spec.nodeName"},
		{name: "WORKER_THREADS", value: "8"},
		{name: "MAX_BATCH_SIZE", value: "5000"},
	}
}

// deploymentTemplate is the pod template of a typical web Deployment; the
// template has no annotations, so injecting one creates the map.
func deploymentTemplate() podTemplate {
	return podTemplate{
		labels: map[string]string{"app": "web", "tier": "frontend"},
		containers: []container{{
			name:  "web",
			image: "registry.example.com/shop/web:2.18.0",
			ports: []int{8080},
			env: []envVar{
				{name: "LOG_LEVEL", value: "info"},
				{name: "UPSTREAM_URL", value: "http://api.team-a.svc:8080"},
				{name: "SESSION_SECRET", from: "secretKeyRef", fromName: "web-session", fromKey: "secret"},
				{name: "POD_NAME", from: "fieldRef", fromName: "metadata.name"},
			},
			cpu:      "250m",
			memory:   "256Mi",
			mounts:   []mount{{name: "config", path: "/etc/web", readOnly: true}},
			probes:   true,
			security: true,
		}},
		volumes: []volume{{name: "config", kind: "configMap", source: "web-config"}},
	}
}

// checksum is a fixed sha256 hex string, as Helm charts put in checksum/*
// annotations.
func checksum(seed string) string {
	return fmt.Sprintf("%x", sha256.Sum256([]byte(seed)))
}
