package command

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

// SecretFile pairs a secret flag (--admin-token) with its file twin
// (--admin-token-file), so the secret need not be on the command line,
// where every user of the machine sees it (ps, /proc/<pid>/cmdline).
// Like every flag, the twin may also come from the environment
// (SKALD_ADMIN_TOKEN_FILE).
type SecretFile struct {
	Name  string             // the secret's flag, without dashes
	Value *string            // the secret flag's value; the file's content lands here
	Path  string             // --<name>-file
	Check func(string) error // validates the content; nil accepts any
}

// maxSecretFileBytes bounds what is read from a secret file: secrets are
// short, and a path mistakenly naming a large file should fail, not load.
const maxSecretFileBytes = 64 << 10

// AddSecretFileFlags declares --<name>-file on fs for each secret.
func AddSecretFileFlags(fs *flag.FlagSet, secrets []*SecretFile) {
	for _, s := range secrets {
		fs.StringVar(&s.Path, s.Name+"-file", "", fmt.Sprintf("read --%s from this file (surrounding whitespace is trimmed); keeps it off the command line, which every local user can see", s.Name))
	}
}

// ReadSecretFiles sets each secret whose file is given (on the command
// line or in the environment: call it after EnvFallback) from that file.
// A secret given both ways is a usage error, whichever way each came: the
// two could differ and neither is obviously meant. An empty value counts
// as not given (SKALD_GOSSIP_KEY= in an env file). It returns a warning
// for each file any user of the machine may read; it does not refuse one,
// since Kubernetes mounts secrets 0644 unless told otherwise and a
// single-user container loses nothing by it.
func ReadSecretFiles(secrets []*SecretFile) (warnings []string, err error) {
	for _, s := range secrets {
		if s.Path == "" {
			continue
		}
		if *s.Value != "" {
			return nil, fmt.Errorf("--%s (or %s) and --%s-file (or %s) are both set: give the secret one way", s.Name, EnvName(s.Name), s.Name, EnvName(s.Name+"-file"))
		}
		v, warn, err := readSecretFile(s.Path)
		if err != nil {
			return nil, fmt.Errorf("--%s-file: %w", s.Name, err)
		}
		if s.Check != nil {
			if err := s.Check(v); err != nil {
				return nil, fmt.Errorf("--%s-file %s: %w", s.Name, s.Path, err)
			}
		}
		*s.Value = v
		if warn != "" {
			warnings = append(warnings, fmt.Sprintf("--%s-file %s %s", s.Name, s.Path, warn))
		}
	}
	return warnings, nil
}

// readSecretFile returns the trimmed content of the file at path (through
// symlinks, as Kubernetes secret volumes have them) and a warning when any
// user may read it.
func readSecretFile(path string) (value, warning string, err error) {
	fh, err := os.Open(path)
	if err != nil {
		return "", "", err
	}
	defer fh.Close()
	fi, err := fh.Stat()
	if err != nil {
		return "", "", err
	}
	if !fi.Mode().IsRegular() {
		return "", "", fmt.Errorf("%s is not a regular file", path)
	}
	b, err := io.ReadAll(io.LimitReader(fh, maxSecretFileBytes+1))
	if err != nil {
		return "", "", fmt.Errorf("read %s: %w", path, err)
	}
	if len(b) > maxSecretFileBytes {
		return "", "", fmt.Errorf("%s is larger than %d KiB: not a secret", path, maxSecretFileBytes>>10)
	}
	value = strings.TrimSpace(string(b))
	if value == "" {
		return "", "", fmt.Errorf("%s is empty", path)
	}
	if perm := fi.Mode().Perm(); perm&0o004 != 0 {
		warning = fmt.Sprintf("is readable by every user of this machine (mode %04o): make it 0600, or 0640 with the server's group", perm)
	}
	return value, warning, nil
}

// EnvName is the environment variable of flag name (EnvFallback's rule).
func EnvName(name string) string {
	return "SKALD_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}
