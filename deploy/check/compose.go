package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
)

// checkCompose loads the compose file as `docker compose config` would
// (schema validation, interpolation, extension merging) and checks that
// every service has a command and a volume for /data, and that the API
// address each advertises (--advertise-http) is published on the host at
// that address: clients on the host follow advertised addresses (leader
// hints, cluster status, the console), so one they cannot reach strands
// them.
//
// The README has users copy example.env to .env first; when there is no
// .env the check does the same in a scratch directory.
func checkCompose(path string) (int, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return 0, err
	}
	dir := filepath.Dir(abs)
	if _, err := os.Stat(filepath.Join(dir, ".env")); os.IsNotExist(err) {
		tmp, err := os.MkdirTemp("", "compose-check-")
		if err != nil {
			return 0, err
		}
		defer os.RemoveAll(tmp)
		for src, dst := range map[string]string{abs: filepath.Base(abs), filepath.Join(dir, "example.env"): ".env"} {
			b, err := os.ReadFile(src)
			if err != nil {
				return 0, err
			}
			if err := os.WriteFile(filepath.Join(tmp, dst), b, 0o600); err != nil {
				return 0, err
			}
		}
		abs = filepath.Join(tmp, filepath.Base(abs))
	}
	opts, err := cli.NewProjectOptions([]string{abs},
		cli.WithWorkingDirectory(filepath.Dir(abs)),
		cli.WithName("skald"),
		cli.WithEnvFiles(), // the .env the README tells users to create may not exist here
	)
	if err != nil {
		return 0, err
	}
	p, err := opts.LoadProject(context.Background())
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	for name, s := range p.Services {
		if len(s.Command) == 0 {
			return 0, fmt.Errorf("service %s: no command", name)
		}
		data := false
		for _, v := range s.Volumes {
			if v.Target == "/data" {
				data = true
			}
		}
		if !data {
			return 0, fmt.Errorf("service %s: no volume at /data", name)
		}
		if err := checkAdvertisedHTTP(s); err != nil {
			return 0, fmt.Errorf("service %s: %w", name, err)
		}
	}
	return len(p.Services), nil
}

// checkAdvertisedHTTP checks that s publishes its --advertise-http address
// on the host, mapped to the API port the server listens on (8080, the
// image's default).
func checkAdvertisedHTTP(s types.ServiceConfig) error {
	adv := ""
	for i, a := range s.Command {
		if a == "--advertise-http" && i+1 < len(s.Command) {
			adv = s.Command[i+1]
		}
	}
	if adv == "" {
		return errors.New("no --advertise-http: the API address a client is told about would be the container's own")
	}
	host, port, err := net.SplitHostPort(adv)
	if err != nil {
		return fmt.Errorf("--advertise-http %q: %w", adv, err)
	}
	for _, p := range s.Ports {
		if p.Published == port && p.HostIP == host && p.Target == 8080 {
			return nil
		}
	}
	return fmt.Errorf("--advertise-http %s is not published on the host (ports: %v): a client on the host could not reach it", adv, s.Ports)
}
