package server

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/skalddb/skald/cmd/skald/internal/command"
	"gopkg.in/yaml.v3"
)

// The server's configuration comes in layers, the first that sets a flag
// winning: the command line, the environment (SKALD_<FLAG>), the file of
// --config (YAML, one key per flag), the flag's default.

// flagSource says where a flag's value came from.
type flagSource string

const (
	fromFlag    flagSource = "flag"
	fromEnv     flagSource = "env"
	fromFile    flagSource = "file"
	fromDefault flagSource = "default"
)

// layerFlags applies the environment, then the config file at path (none
// when empty), to every flag fs's command line did not set. It returns
// where each flag's value came from.
func layerFlags(fs *flag.FlagSet, path string) (map[string]flagSource, error) {
	src := map[string]flagSource{}
	fs.VisitAll(func(f *flag.Flag) { src[f.Name] = fromDefault })
	fs.Visit(func(f *flag.Flag) { src[f.Name] = fromFlag })
	if err := command.EnvFallback(fs); err != nil {
		return nil, err
	}
	fs.Visit(func(f *flag.Flag) {
		if src[f.Name] == fromDefault {
			src[f.Name] = fromEnv
		}
	})
	if path == "" {
		return src, nil
	}
	values, err := readConfigFile(path)
	if err != nil {
		return nil, err
	}
	for _, name := range slices.Sorted(maps.Keys(values)) {
		f := fs.Lookup(name)
		switch {
		case f == nil || name == "config":
			return nil, fmt.Errorf("config %s: unknown key %q (keys are the flags of 'skald server --help', without the dashes)", path, name)
		case src[name] != fromDefault:
			continue // the command line or the environment set it
		}
		if err := fs.Set(name, values[name]); err != nil {
			return nil, fmt.Errorf("config %s: %s: %q: %w", path, name, values[name], err)
		}
		src[name] = fromFile
	}
	return src, nil
}

// readConfigFile reads a YAML mapping of flag names to scalars (a list
// becomes a comma-separated value, as --join and --cors-origins take).
func readConfigFile(path string) (map[string]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	var doc map[string]any
	dec := yaml.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&doc); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	out := make(map[string]string, len(doc))
	for k, v := range doc {
		s, err := configScalar(v)
		if err != nil {
			return nil, fmt.Errorf("config %s: %s: %w", path, k, err)
		}
		out[k] = s
	}
	return out, nil
}

func configScalar(v any) (string, error) {
	switch v := v.(type) {
	case nil:
		return "", nil
	case string:
		return v, nil
	case bool:
		return strconv.FormatBool(v), nil
	case int:
		return strconv.Itoa(v), nil
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64), nil
	case []any:
		parts := make([]string, 0, len(v))
		for _, e := range v {
			s, err := configScalar(e)
			if err != nil {
				return "", err
			}
			parts = append(parts, s)
		}
		return strings.Join(parts, ","), nil
	}
	return "", fmt.Errorf("want a value or a list of values, got %T", v)
}

// printConfig writes the effective settings as a config file would hold
// them, each with where it came from; secrets are masked.
func printConfig(w io.Writer, fs *flag.FlagSet, src map[string]flagSource, secrets []string) {
	fmt.Fprintln(w, "# skald server: the effective configuration (flag > env > file > default)")
	fs.VisitAll(func(f *flag.Flag) {
		if f.Name == "print-config" || f.Name == "config" {
			return
		}
		v := f.Value.String()
		if slices.Contains(secrets, f.Name) && v != "" {
			v = "********"
		}
		fmt.Fprintf(w, "%s: %s  # %s\n", f.Name, strconv.Quote(v), src[f.Name])
	})
}
