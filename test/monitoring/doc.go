// Package monitoring checks the chart's PrometheusRule and Grafana
// dashboard against the metrics serve exports: every rule is loaded with
// Prometheus's own rule parser, every expression (and every dashboard
// query) parsed with its PromQL parser, and every metric they name must be
// one a running serve exports. A metric renamed in the code fails it.
//
// Inputs (make test-monitoring sets them): YUNIKORN_USERINFO_BINARY, the
// serve binary; MONITORING_CHART, the chart rendered with the monitoring
// values (PrometheusRule and dashboard ConfigMap).
package monitoring
