package cli

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// kubeAPI is the little of the Kubernetes API a StatefulSet member needs:
// reading its own StatefulSet, with the pod's service account.
type kubeAPI struct {
	base      string // https://host:port
	token     string
	namespace string
	client    *http.Client
}

// serviceAccountDir is where Kubernetes mounts a pod's credentials.
const serviceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// inClusterAPI reads the pod's service account from dir and the API
// address from the environment Kubernetes sets in every pod.
func inClusterAPI(dir string) (kubeAPI, error) {
	host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
	if host == "" || port == "" {
		return kubeAPI{}, errors.New("not running in Kubernetes (KUBERNETES_SERVICE_HOST is not set)")
	}
	token, err := os.ReadFile(filepath.Join(dir, "token"))
	if err != nil {
		return kubeAPI{}, fmt.Errorf("service account token: %w", err)
	}
	ns, err := os.ReadFile(filepath.Join(dir, "namespace"))
	if err != nil {
		return kubeAPI{}, fmt.Errorf("service account namespace: %w", err)
	}
	ca, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
	if err != nil {
		return kubeAPI{}, fmt.Errorf("service account CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return kubeAPI{}, errors.New("service account CA: no PEM certificate")
	}
	return kubeAPI{
		base: "https://" + net.JoinHostPort(host, port), token: strings.TrimSpace(string(token)), namespace: strings.TrimSpace(string(ns)),
		client: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}},
	}, nil
}

// statefulSetOrdinal splits a StatefulSet pod name ("skald-2") into the
// set's name and the pod's ordinal.
func statefulSetOrdinal(pod string) (string, int, error) {
	i := strings.LastIndexByte(pod, '-')
	if i <= 0 {
		return "", 0, fmt.Errorf("pod name %q is not <statefulset>-<ordinal>", pod)
	}
	n, err := strconv.Atoi(pod[i+1:])
	if err != nil || n < 0 {
		return "", 0, fmt.Errorf("pod name %q is not <statefulset>-<ordinal>", pod)
	}
	return pod[:i], n, nil
}

// scaledDown reports whether pod is going away for good: its ordinal is at
// or above its StatefulSet's desired replicas (a scale-down), as opposed to
// a restart or rolling update, after which the pod comes back.
func (k kubeAPI) scaledDown(ctx context.Context, pod string) (bool, string, error) {
	set, ordinal, err := statefulSetOrdinal(pod)
	if err != nil {
		return false, "", err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/apis/apps/v1/namespaces/%s/statefulsets/%s", k.base, k.namespace, set), nil)
	if err != nil {
		return false, "", err
	}
	req.Header.Set("Authorization", "Bearer "+k.token)
	req.Header.Set("Accept", "application/json")
	resp, err := k.client.Do(req)
	if err != nil {
		return false, "", fmt.Errorf("get statefulset %s: %w", set, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return false, "", fmt.Errorf("get statefulset %s/%s: %s", k.namespace, set, resp.Status)
	}
	var ss struct {
		Spec struct {
			Replicas *int `json:"replicas"`
		} `json:"spec"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&ss); err != nil {
		return false, "", fmt.Errorf("statefulset %s: %w", set, err)
	}
	replicas := 1
	if ss.Spec.Replicas != nil {
		replicas = *ss.Spec.Replicas
	}
	return ordinal >= replicas, fmt.Sprintf("pod %s has ordinal %d; statefulset %s wants %d replicas", pod, ordinal, set, replicas), nil
}
