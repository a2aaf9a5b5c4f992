package main

import (
	"bytes"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

// certificate and serviceMonitor hold the fields of the two CRDs the chart
// renders; decoding is strict against them.
type certificate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		SecretName  string   `json:"secretName"`
		Duration    string   `json:"duration"`
		RenewBefore string   `json:"renewBefore"`
		Usages      []string `json:"usages"`
		DNSNames    []string `json:"dnsNames"`
		IPAddresses []string `json:"ipAddresses"`
		IssuerRef   struct {
			Name  string `json:"name"`
			Kind  string `json:"kind"`
			Group string `json:"group"`
		} `json:"issuerRef"`
	} `json:"spec"`
}

type serviceMonitor struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		Selector  metav1.LabelSelector `json:"selector"`
		Endpoints []struct {
			Port      string `json:"port"`
			Path      string `json:"path"`
			Interval  string `json:"interval"`
			Scheme    string `json:"scheme"`
			TLSConfig *struct {
				CA struct {
					Secret corev1.SecretKeySelector `json:"secret"`
				} `json:"ca"`
			} `json:"tlsConfig"`
			Authorization *struct {
				Type        string                   `json:"type"`
				Credentials corev1.SecretKeySelector `json:"credentials"`
			} `json:"authorization"`
		} `json:"endpoints"`
	} `json:"spec"`
}

type manifests struct {
	sets     []*appsv1.StatefulSet
	services []*corev1.Service
	secrets  map[string]bool
	pdbs     []*policyv1.PodDisruptionBudget
	monitors []*serviceMonitor
	certs    []*certificate
	accounts map[string]bool
	roles    map[string]*rbacv1.Role
	bindings []*rbacv1.RoleBinding
}

// checkManifests decodes every document strictly and cross-checks them.
func checkManifests(b []byte) (int, error) {
	m := &manifests{secrets: map[string]bool{}, accounts: map[string]bool{}, roles: map[string]*rbacv1.Role{}}
	n := 0
	for i, doc := range bytes.Split(b, []byte("\n---")) {
		if len(bytes.TrimSpace(stripComments(doc))) == 0 {
			continue
		}
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &tm); err != nil {
			return n, fmt.Errorf("document %d: %w", i, err)
		}
		var obj any
		switch tm.APIVersion + " " + tm.Kind {
		case "apps/v1 StatefulSet":
			o := &appsv1.StatefulSet{}
			m.sets, obj = append(m.sets, o), o
		case "v1 Service":
			o := &corev1.Service{}
			m.services, obj = append(m.services, o), o
		case "v1 Secret":
			o := &corev1.Secret{}
			obj = o
		case "v1 ServiceAccount":
			o := &corev1.ServiceAccount{}
			obj = o
		case "policy/v1 PodDisruptionBudget":
			o := &policyv1.PodDisruptionBudget{}
			m.pdbs, obj = append(m.pdbs, o), o
		case "rbac.authorization.k8s.io/v1 Role":
			o := &rbacv1.Role{}
			obj = o
		case "rbac.authorization.k8s.io/v1 RoleBinding":
			o := &rbacv1.RoleBinding{}
			m.bindings, obj = append(m.bindings, o), o
		case "cert-manager.io/v1 Certificate":
			o := &certificate{}
			m.certs, obj = append(m.certs, o), o
		case "monitoring.coreos.com/v1 ServiceMonitor":
			o := &serviceMonitor{}
			m.monitors, obj = append(m.monitors, o), o
		default:
			return n, fmt.Errorf("document %d: unexpected %s %s", i, tm.APIVersion, tm.Kind)
		}
		if err := yaml.UnmarshalStrict(doc, obj); err != nil {
			return n, fmt.Errorf("%s (document %d): %w", tm.Kind, i, err)
		}
		switch o := obj.(type) {
		case *corev1.Secret:
			m.secrets[o.Name] = true
		case *corev1.ServiceAccount:
			m.accounts[o.Name] = true
		case *rbacv1.Role:
			m.roles[o.Name] = o
		}
		n++
	}
	return n, m.crossCheck()
}

// underMount reports whether path lies under one of the mounts.
func underMount(path string, mounts []corev1.VolumeMount) bool {
	for _, vm := range mounts {
		if strings.HasPrefix(path, strings.TrimSuffix(vm.MountPath, "/")+"/") {
			return true
		}
	}
	return false
}

func stripComments(doc []byte) []byte {
	var out [][]byte
	for _, l := range bytes.Split(doc, []byte("\n")) {
		if t := bytes.TrimSpace(l); len(t) > 0 && t[0] != '#' {
			out = append(out, l)
		}
	}
	return bytes.Join(out, []byte("\n"))
}

func (m *manifests) crossCheck() error {
	if len(m.sets) != 1 {
		return fmt.Errorf("%d StatefulSets, want 1", len(m.sets))
	}
	ss := m.sets[0]
	pod := ss.Spec.Template
	podLabels := labels.Set(pod.Labels)
	sel, err := metav1.LabelSelectorAsSelector(ss.Spec.Selector)
	if err != nil || !sel.Matches(podLabels) {
		return fmt.Errorf("statefulset selector %v does not match pod labels %v", ss.Spec.Selector, pod.Labels)
	}
	if ss.Spec.PodManagementPolicy != appsv1.ParallelPodManagement {
		return fmt.Errorf("podManagementPolicy %q, want Parallel (bootstrap-expect needs every pod)", ss.Spec.PodManagementPolicy)
	}
	if ss.Spec.Replicas == nil || *ss.Spec.Replicas < 1 {
		return fmt.Errorf("replicas not set")
	}
	if !m.accounts[pod.Spec.ServiceAccountName] {
		return fmt.Errorf("service account %q is not rendered", pod.Spec.ServiceAccountName)
	}
	if len(pod.Spec.Containers) != 1 {
		return fmt.Errorf("%d containers, want 1", len(pod.Spec.Containers))
	}
	c := pod.Spec.Containers[0]
	ports := map[string]bool{}
	for _, p := range c.Ports {
		ports[p.Name] = true
	}
	for name, p := range map[string]*corev1.Probe{"readiness": c.ReadinessProbe, "liveness": c.LivenessProbe, "startup": c.StartupProbe} {
		if p == nil || p.HTTPGet == nil {
			return fmt.Errorf("%s probe: want an HTTP GET", name)
		}
		if !ports[p.HTTPGet.Port.String()] {
			return fmt.Errorf("%s probe port %q is not a container port", name, p.HTTPGet.Port.String())
		}
	}
	if c.ReadinessProbe.HTTPGet.Path != "/readyz" || c.LivenessProbe.HTTPGet.Path != "/healthz" {
		return fmt.Errorf("probes: readiness %s, liveness %s; want /readyz, /healthz", c.ReadinessProbe.HTTPGet.Path, c.LivenessProbe.HTTPGet.Path)
	}
	if c.Lifecycle == nil || c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Exec == nil || !strings.Contains(strings.Join(c.Lifecycle.PreStop.Exec.Command, " "), "leave --if-scaled-down") {
		return fmt.Errorf("preStop: want `skald leave --if-scaled-down`")
	}
	// A secret named *-existing stands for auth.existingSecret, which the
	// user creates outside the chart.
	for _, e := range c.Env {
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && !m.secrets[e.ValueFrom.SecretKeyRef.Name] && !strings.HasSuffix(e.ValueFrom.SecretKeyRef.Name, "-existing") {
			return fmt.Errorf("env %s: secret %q is not rendered", e.Name, e.ValueFrom.SecretKeyRef.Name)
		}
	}
	vols := map[string]bool{}
	for _, v := range pod.Spec.Volumes {
		vols[v.Name] = true
		if v.Secret == nil {
			continue
		}
		for _, it := range v.Secret.Items {
			if it.Key == "admin-token" && !m.secrets[v.Secret.SecretName] && !strings.HasSuffix(v.Secret.SecretName, "-existing") {
				return fmt.Errorf("volume %s: secret %q is not rendered", v.Name, v.Secret.SecretName)
			}
		}
	}
	for _, t := range ss.Spec.VolumeClaimTemplates {
		vols[t.Name] = true
	}
	for _, vm := range c.VolumeMounts {
		if !vols[vm.Name] {
			return fmt.Errorf("volume mount %s: no such volume", vm.Name)
		}
	}
	// Secrets come from files (--admin-token-file, the preStop hook's
	// --token-file): each must lie on a mounted volume, and no secret may
	// travel in the environment or on the command line instead.
	for _, arg := range append(append([]string{}, c.Args...), c.Lifecycle.PreStop.Exec.Command...) {
		name, path, ok := strings.Cut(arg, "=")
		if !ok || !strings.HasPrefix(name, "--") {
			continue
		}
		for _, secret := range []string{"--admin-token", "--gossip-key", "--cluster-secret", "--token"} {
			if name == secret {
				return fmt.Errorf("arg %s: a secret on the command line; use %s-file", name, secret)
			}
		}
		if strings.HasSuffix(name, "-file") && !underMount(path, c.VolumeMounts) {
			return fmt.Errorf("arg %s: %s is on no volume mount", name, path)
		}
	}
	for _, e := range c.Env {
		switch e.Name {
		case "SKALD_ADMIN_TOKEN", "SKALD_GOSSIP_KEY", "SKALD_CLUSTER_SECRET", "SKALD_TOKEN":
			return fmt.Errorf("env %s: a secret in the environment; mount it and use the -file flag", e.Name)
		}
	}
	headless := false
	for _, s := range m.services {
		ssel := labels.SelectorFromSet(s.Spec.Selector)
		if !ssel.Matches(podLabels) {
			return fmt.Errorf("service %s selects no pod", s.Name)
		}
		for _, p := range s.Spec.Ports {
			if !ports[p.TargetPort.String()] {
				return fmt.Errorf("service %s: target port %q is not a container port", s.Name, p.TargetPort.String())
			}
		}
		if s.Name == ss.Spec.ServiceName {
			if s.Spec.ClusterIP != corev1.ClusterIPNone || !s.Spec.PublishNotReadyAddresses {
				return fmt.Errorf("service %s (the StatefulSet's) must be headless and publish not-ready addresses", s.Name)
			}
			headless = true
		}
	}
	if !headless {
		return fmt.Errorf("no headless service %q", ss.Spec.ServiceName)
	}
	for _, p := range m.pdbs {
		psel, err := metav1.LabelSelectorAsSelector(p.Spec.Selector)
		if err != nil || !psel.Matches(podLabels) {
			return fmt.Errorf("pdb %s selects no pod", p.Name)
		}
		if p.Spec.MaxUnavailable == nil || p.Spec.MaxUnavailable.IntValue() != 1 {
			return fmt.Errorf("pdb %s: maxUnavailable must be 1", p.Name)
		}
	}
	for _, b := range m.bindings {
		if _, ok := m.roles[b.RoleRef.Name]; !ok {
			return fmt.Errorf("rolebinding %s: role %q is not rendered", b.Name, b.RoleRef.Name)
		}
		for _, s := range b.Subjects {
			if s.Kind == "ServiceAccount" && !m.accounts[s.Name] {
				return fmt.Errorf("rolebinding %s: service account %q is not rendered", b.Name, s.Name)
			}
		}
	}
	for _, sm := range m.monitors {
		msel, err := metav1.LabelSelectorAsSelector(&sm.Spec.Selector)
		if err != nil || len(sm.Spec.Endpoints) == 0 || sm.Spec.Endpoints[0].Path != "/metrics" {
			return fmt.Errorf("servicemonitor %s: want a selector and a /metrics endpoint", sm.Name)
		}
		if a := sm.Spec.Endpoints[0].Authorization; a != nil {
			if a.Type != "Bearer" || (!m.secrets[a.Credentials.Name] && !strings.HasSuffix(a.Credentials.Name, "-existing")) || a.Credentials.Key != "admin-token" {
				return fmt.Errorf("servicemonitor %s: authorization must be Bearer with a rendered secret's admin-token", sm.Name)
			}
		}
		found := false
		for _, s := range m.services {
			if msel.Matches(labels.Set(s.Labels)) {
				found = true
			}
		}
		if !found {
			return fmt.Errorf("servicemonitor %s selects no service", sm.Name)
		}
	}
	for _, ct := range m.certs {
		if ct.Spec.IssuerRef.Name == "" || len(ct.Spec.DNSNames) == 0 {
			return fmt.Errorf("certificate %s: want an issuer and DNS names", ct.Name)
		}
		tlsVol := false
		for _, v := range pod.Spec.Volumes {
			if v.Secret != nil && v.Secret.SecretName == ct.Spec.SecretName {
				tlsVol = true
			}
		}
		if !tlsVol {
			return fmt.Errorf("certificate %s writes secret %s, which no pod volume mounts", ct.Name, ct.Spec.SecretName)
		}
	}
	return nil
}
