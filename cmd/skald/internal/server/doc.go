// Package server is skald server: flags, environment and config file into
// the node's configuration, the API and metrics listeners, the collector
// settings, file descriptor limits and tracing.
package server
