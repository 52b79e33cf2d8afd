package parity

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
)

// fixedSeed makes every run cover the same cases; each run also covers a
// fresh seed so that, over time, the random search keeps looking further.
const fixedSeed uint64 = 20260101

var (
	// setting reads these two by name, so that their environment variables
	// stand in when they are not set.
	_     = flag.String("parity.seed", "", "replay this seed only (env PARITY_SEED); by default a fixed seed and a fresh one run")
	nFlag = flag.Int("parity.n", 2000, "random cases per seed (env PARITY_N)")
	_     = flag.Int("parity.case", -1, "run only this case index of the seed (env PARITY_CASE)")
)

// setting returns the flag's value when it was set, else the environment
// variable's, else "".
func setting(name, env string) string {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	if set {
		return flag.Lookup(name).Value.String()
	}
	return os.Getenv(env)
}

// seeds returns the seeds to run: the one asked for, or the fixed seed and
// a fresh one.
func seeds(t *testing.T) []uint64 {
	t.Helper()
	if s := setting("parity.seed", "PARITY_SEED"); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("invalid -parity.seed %q: want an unsigned integer", s)
		}
		return []uint64{seed}
	}
	return []uint64{fixedSeed, runSeed}
}

// runSeed is this run's fresh seed, shared by every test so that one
// -parity.seed replays all of them.
var runSeed = rand.Uint64()

// caseIndexes returns the indexes of the cases to run for one seed.
func caseIndexes(t *testing.T) []int {
	t.Helper()
	if s := setting("parity.case", "PARITY_CASE"); s != "" && s != "-1" {
		i, err := strconv.Atoi(s)
		if err != nil || i < 0 {
			t.Fatalf("invalid -parity.case %q: want a case index >= 0", s)
		}
		return []int{i}
	}
	n := *nFlag
	if s := setting("parity.n", "PARITY_N"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v <= 0 {
			t.Fatalf("invalid -parity.n %q: want a positive integer", s)
		}
		n = v
	}
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// replay is the command that reruns one case.
func replay(test string, seed uint64, index int) string {
	return fmt.Sprintf("cd test/parity && go test -count=1 -run '^%s$' -parity.seed=%d -parity.case=%d -v", test, seed, index)
}
