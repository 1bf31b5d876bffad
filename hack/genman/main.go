// Command genman writes gensee's man pages (gensee(1) and one page per
// subcommand) from the CLI's command tree: genman -out DIR [-version V] [-date D].
// make install and make release run it; see cmd/gensee/cli/man.go.
package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/gensee/gensee/cmd/gensee/cli"
)

func main() {
	out := flag.String("out", "", "directory to write the pages to")
	version := flag.String("version", "dev", "version named in each page's header")
	date := flag.String("date", "", "date in each page's header (default: SOURCE_DATE_EPOCH, else today)")
	flag.Parse()
	if *out == "" || flag.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "usage: genman -out DIR [-version V] [-date YYYY-MM-DD]")
		os.Exit(2)
	}
	if *date == "" {
		t := time.Now()
		if s, err := strconv.ParseInt(os.Getenv("SOURCE_DATE_EPOCH"), 10, 64); err == nil {
			t = time.Unix(s, 0)
		}
		*date = t.UTC().Format("2006-01-02")
	}
	files, err := cli.WriteManPages(*out, *date, *version)
	if err != nil {
		fmt.Fprintln(os.Stderr, "genman:", err)
		os.Exit(1)
	}
	fmt.Printf("genman: %d pages in %s\n", len(files), *out)
}
