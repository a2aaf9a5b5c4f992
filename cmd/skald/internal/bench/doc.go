// Package bench is skald bench: workloads against a running cluster, their
// latency, throughput and CPU, as a table, JSON or a plot.
package bench
