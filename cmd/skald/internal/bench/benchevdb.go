package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"

	"github.com/skalddb/skald/cmd/skald/internal/command"
)

// evdbAppend is the op of the evdb-append workload for caller w: one
// EventoDB stream.write per call over POST /rpc, on a connection of its
// own, as EventoDB's SDKs send it.
func (c *benchConfig) evdbAppend(cf *command.Flags, w int) op {
	hc := benchHTTPClient(cf, 1)
	url := c.url(w) + "/rpc"
	var body []byte
	return func(ctx context.Context, r *rand.Rand) (int, error) {
		body = append(body[:0], `["stream.write",`...)
		body = strconv.AppendQuote(body, c.stream(r.IntN(c.streams)))
		body = append(body, `,{"type":"Bench","data":`...)
		body = append(body, c.payloadJSON(r)...)
		body = append(body, "}]"...)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			return 0, err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+cf.Token)
		resp, err := hc.Do(req)
		if err != nil {
			return 0, err
		}
		reply, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return 0, err
		}
		if resp.StatusCode != http.StatusOK || !bytes.Contains(reply, []byte(`"globalPosition"`)) {
			return 0, fmt.Errorf("stream.write: %s: %s", resp.Status, bytes.TrimSpace(reply))
		}
		return 1, nil
	}
}
