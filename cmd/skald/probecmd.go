package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"
)

// runProbe is for container health checks in images without curl:
// `skald probe URL` exits 0 when GET URL answers 200 within 5 s.
func runProbe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) != 1 {
		fmt.Fprintln(stderr, "Usage: skald probe URL   (exit 0 when GET URL answers 200)")
		return &exitError{exitUsage, fmt.Errorf("probe: want one URL")}
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, args[0], nil)
	if err != nil {
		return &exitError{exitUsage, err}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return &exitError{exitUnavailable, err}
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return &exitError{exitUnavailable, fmt.Errorf("probe: %s", resp.Status)}
	}
	return nil
}
