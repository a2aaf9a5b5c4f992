package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/compose-spec/compose-go/v2/cli"
)

// checkCompose loads the compose file as `docker compose config` would
// (schema validation, interpolation, extension merging) and checks that
// every service has a command and a volume for /data.
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
	}
	return len(p.Services), nil
}
