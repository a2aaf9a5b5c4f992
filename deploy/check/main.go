// Command check validates the deployment files offline, without a
// Kubernetes API server or a Docker engine (CI has neither):
//
//	helm template ... | go run . k8s -          rendered chart manifests
//	go run . compose ../compose.yaml            the compose file
//	go run . dockerfile ../Dockerfile           BuildKit's parser and build checks
//	go run . rules ../prometheus/alerts.yaml    Prometheus rules, parsed as Prometheus does
//
// Built-in Kubernetes kinds are decoded strictly into the k8s.io/api
// types (an unknown or misspelt field fails), then cross-checked (selectors
// match pod labels, probes and services name real ports, env secrets and
// volume mounts exist). CRD kinds (cert-manager Certificate, Prometheus
// ServiceMonitor) are checked against the fields the chart uses. The
// compose file is loaded by compose-go, which validates it against the
// compose specification's schema; alerting rules by Prometheus's own
// loader. It lives in its own module so the product does not depend on
// k8s.io, compose-go or Prometheus.
package main

import (
	"fmt"
	"io"
	"os"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: check k8s FILE|-  |  check compose FILE  |  check dockerfile FILE  |  check rules FILE")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "k8s":
		var in io.Reader = os.Stdin
		if os.Args[2] != "-" {
			f, ferr := os.Open(os.Args[2])
			if ferr != nil {
				fmt.Fprintln(os.Stderr, ferr)
				os.Exit(1)
			}
			defer f.Close()
			in = f
		}
		var b []byte
		if b, err = io.ReadAll(in); err == nil {
			var n int
			n, err = checkManifests(b)
			if err == nil {
				fmt.Printf("ok: %d manifests\n", n)
			}
		}
	case "dockerfile":
		var n int
		n, err = checkDockerfile(os.Args[2])
		if err == nil {
			fmt.Printf("ok: %d stages\n", n)
		}
	case "compose":
		var n int
		n, err = checkCompose(os.Args[2])
		if err == nil {
			fmt.Printf("ok: %d services\n", n)
		}
	case "rules":
		var n int
		n, err = checkRules(os.Args[2])
		if err == nil {
			fmt.Printf("ok: %d rules\n", n)
		}
	default:
		err = fmt.Errorf("unknown check %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "check:", err)
		os.Exit(1)
	}
}
