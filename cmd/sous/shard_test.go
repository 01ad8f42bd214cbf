package main

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/seed5ad92d46/sous/internal/testutil"
)

// TestShardsPartitionTheItems: four runs of one recipe with --shard 0/4
// .. 3/4 together start every item of its parallel() exactly once, each
// run the items whose index % 4 is its shard, with None in the others'
// places; the shard global says which part a run is.
func TestShardsPartitionTheItems(t *testing.T) {
	t.Parallel()
	dir := testutil.WriteTree(t, map[string]string{"main.star": `
d = args["dir"]
def start(i):
    return spawn(["sh", "-c", 'echo "$1" >> "$0/ran"', d, str(i)], echo=False)
res = parallel(list(range(10)), start, limit=3)
print("shard %d of %d:" % (shard.index, shard.count), [i for i, r in enumerate(res) if r != None],
      "nones", len([r for r in res if r == None]))
`})
	main := filepath.Join(dir, "main.star")
	wantMine := map[int]string{0: "[0, 4, 8] nones 7", 1: "[1, 5, 9] nones 7", 2: "[2, 6] nones 8", 3: "[3, 7] nones 8"}
	for i := range 4 {
		o := sous(t, "run", main, "-a", "dir="+dir, "--shard", strconv.Itoa(i)+"/4")
		o.expect(t, 0, "shard "+strconv.Itoa(i)+" of 4: "+wantMine[i])
	}
	b, err := os.ReadFile(filepath.Join(dir, "ran"))
	if err != nil {
		t.Fatal(err)
	}
	var ran []int
	for _, f := range strings.Fields(string(b)) {
		n, _ := strconv.Atoi(f)
		ran = append(ran, n)
	}
	slices.Sort(ran)
	if want := []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}; !slices.Equal(ran, want) {
		t.Errorf("the four shards ran %v, want each of %v once", ran, want)
	}
	sous(t, "run", main, "-a", "dir="+t.TempDir()).expect(t, 0, "shard 0 of 1: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9] nones 0")
}

// TestShardFlagIsChecked: --shard wants I/N with 0 <= I < N; anything else
// is a usage error, exit 2, before the recipe runs.
func TestShardFlagIsChecked(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"4/4", "-1/4", "1/0", "1", "a/b", "1/2/3", "/3"} {
		o, _ := runStar(t, "print(\"ran\")\n", "--shard", bad)
		o.expect(t, 2, "--shard "+strconv.Quote(bad)+": want I/N with 0 <= I < N")
		if strings.Contains(o.stderr, "ran") {
			t.Errorf("--shard %s: the recipe ran", bad)
		}
	}
}
