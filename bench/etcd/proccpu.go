package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
)

// procCPUMethod is how `measure` reads server CPU; compare prints it so a
// reader knows what the CPU column means.
const procCPUMethod = "utime+stime from /proc/<pid>/stat of the 3 server processes the script started, summed, read just before and just after each load run"

// statTicks returns utime+stime (fields 14 and 15 of proc(5), in clock
// ticks) from the text of /proc/<pid>/stat. The command name in field 2 is
// in parentheses and may itself hold spaces and parentheses, so fields are
// counted from the last ')'.
func statTicks(stat string) (uint64, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, errors.New("no ')' after the command name")
	}
	f := strings.Fields(stat[i+1:]) // f[0] is field 3 (state)
	if len(f) < 13 {
		return 0, fmt.Errorf("%d fields after the command name, want at least 13", len(f))
	}
	var sum uint64
	for _, s := range f[11:13] { // fields 14 (utime) and 15 (stime)
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("utime/stime %q: %w", s, err)
		}
		sum += v
	}
	return sum, nil
}

// procTicks sums utime+stime over the processes.
func procTicks(pids []int) (uint64, error) {
	var sum uint64
	for _, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return 0, err // the server died: no figure rather than a wrong one
		}
		t, err := statTicks(string(b))
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
		sum += t
	}
	return sum, nil
}

func parsePIDs(s string) ([]int, error) {
	var pids []int
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' }) {
		p, err := strconv.Atoi(f)
		if err != nil || p <= 0 {
			return nil, fmt.Errorf("pid %q", f)
		}
		pids = append(pids, p)
	}
	if len(pids) == 0 {
		return nil, errors.New("no pids")
	}
	return pids, nil
}

// usPerOp is the CPU the ticks stand for, in µs, divided over the ops.
func usPerOp(ticks uint64, clkTck int, ops int64) float64 {
	if ops <= 0 || clkTck <= 0 {
		return 0
	}
	return float64(ticks) * 1e6 / float64(clkTck) / float64(ops)
}

// measure runs a load driver that prints one JSON result (ours or skald
// bench's) and adds the CPU the given server processes spent while it ran,
// the same way for every system: one method for all three sides.
//
//	measure --pids 1,2,3 --clk-tck 100 -- skald bench ... -o json
func measure(args []string) error {
	fs := flag.NewFlagSet("measure", flag.ContinueOnError)
	pidList := fs.String("pids", "", "comma-separated server pids")
	clkTck := fs.Int("clk-tck", 100, "clock ticks per second (getconf CLK_TCK)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return errors.New("usage: measure --pids P,... --clk-tck N -- COMMAND [ARGS]")
	}
	pids, err := parsePIDs(*pidList)
	if err != nil {
		return fmt.Errorf("--pids: %w", err)
	}
	t0, err := procTicks(pids)
	if err != nil {
		return err
	}
	var out bytes.Buffer
	cmd := exec.Command(fs.Arg(0), fs.Args()[1:]...)
	cmd.Stdout, cmd.Stderr = &out, os.Stderr
	runErr := cmd.Run()
	t1, tickErr := procTicks(pids)
	if runErr != nil {
		return fmt.Errorf("%s: %w", fs.Arg(0), runErr)
	}
	res := map[string]any{}
	dec := json.NewDecoder(&out)
	dec.UseNumber()
	if err := dec.Decode(&res); err != nil {
		return fmt.Errorf("%s output: %w", fs.Arg(0), err)
	}
	if tickErr != nil {
		fmt.Fprintln(os.Stderr, "measure: server CPU not measured:", tickErr)
	} else {
		n, _ := res["ops"].(json.Number)
		ops, _ := n.Int64()
		res["server_cpu_proc_us_per_op"] = usPerOp(t1-t0, *clkTck, ops)
		res["server_cpu_proc_s"] = float64(t1-t0) / float64(*clkTck)
		res["server_cpu_proc_pids"] = pids
	}
	return json.NewEncoder(os.Stdout).Encode(res)
}
