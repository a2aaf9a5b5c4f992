package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/skalddb/skald/client"
)

// A namespace of its own for an application, then writes and reads with
// the namespace's token.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	// The admin token creates namespaces (and lets the client discover
	// every member from any one of them).
	admin, err := client.New(ctx, client.Config{Endpoints: endpoints, Token: adminToken})
	if err != nil {
		log.Fatal(err)
	}
	defer admin.Close()
	ns, err := admin.CreateNamespace(ctx, "example-bank", "the bank service", "")
	if err != nil {
		log.Fatal(err)
	}
	defer admin.DeleteNamespace(ctx, ns.Name)

	// An application uses its namespace's token.
	c, err := client.New(ctx, client.Config{Endpoints: endpoints, Token: ns.Token})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	res, err := c.Append(ctx, "account-123", []client.NewMessage{
		{Type: "Opened", Data: json.RawMessage(`{"owner":"ada"}`)},
		{Type: "Deposited", Data: json.RawMessage(`{"amount":100}`)},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("appended at positions", res.FirstPosition, "to", res.LastPosition)

	// Reads are session-consistent: this one sees the append on any member.
	msgs, err := c.ReadStream(ctx, client.StreamQuery{Stream: "account-123"})
	if err != nil {
		log.Fatal(err)
	}
	for _, m := range msgs {
		fmt.Println(m.Position, m.Type, string(m.Data))
	}

	// A linearizable read also sees every write acknowledged to anyone
	// else before it began.
	v, err := c.StreamVersion(ctx, "account-123", client.WithLinearizable())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("version", v)
	// Output:
	// appended at positions 0 to 1
	// 0 Opened {"owner":"ada"}
	// 1 Deposited {"amount":100}
	// version 1
}

// Optimistic concurrency: an append that expects a version the stream is
// no longer at fails, and says which version it is at. (exampleNamespace
// creates a namespace and returns a client with its token, as Example
// does.)
func ExampleClient_Append_expectedVersion() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := exampleNamespace(ctx, "example-wallets")
	defer c.Close()

	deposit := []client.NewMessage{{Type: "Deposited", Data: json.RawMessage(`{"amount":5}`)}}
	if _, err := c.Append(ctx, "wallet-7", deposit, client.ExpectVersion(-1)); err != nil {
		log.Fatal(err)
	}
	_, err := c.Append(ctx, "wallet-7", deposit, client.ExpectVersion(-1))
	var wrong *client.WrongExpectedVersionError
	if errors.As(err, &wrong) {
		fmt.Println(errors.Is(err, client.ErrWrongExpectedVersion), "the stream is at version", wrong.Actual)
	}
	// Output:
	// true the stream is at version 0
}

// A subscription delivers the stored messages, then new ones as they are
// written; it moves to another member by itself when one fails.
func ExampleClient_Subscribe() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := exampleNamespace(ctx, "example-invoices")
	defer c.Close()
	for i := range 3 {
		data := json.RawMessage(fmt.Sprintf(`{"line":%d}`, i))
		if _, err := c.Append(ctx, fmt.Sprintf("invoice-%d", i), []client.NewMessage{{Type: "Issued", Data: data}}); err != nil {
			log.Fatal(err)
		}
	}

	seen := 0
	for m, err := range c.Subscribe(ctx, client.Subscription{Category: "invoice"}) {
		if err != nil {
			log.Fatal(err) // ctx ended, or the server refused the subscription
		}
		fmt.Println(m.Stream, m.Type, string(m.Data))
		if seen++; seen == 3 {
			break // ends the subscription
		}
	}
	// Output:
	// invoice-0 Issued {"line":0}
	// invoice-1 Issued {"line":1}
	// invoice-2 Issued {"line":2}
}

// A client that must reach the cluster through one address, a load
// balancer or a proxy: Pinned keeps every call on it (the node behind it
// forwards writes to the leader) instead of calling the addresses the
// members advertise.
func ExampleConfig_pinned() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.New(ctx, client.Config{Endpoints: endpoints[:1], Token: adminToken, Pinned: true})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	st, err := c.Status(ctx) // the view of the node at endpoints[0]
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(st.Servers), "servers, leader known:", st.LeaderID != "")
	// Output:
	// 3 servers, leader known: true
}

// A consumer group hands each message of its source to one of its
// consumers until the message is settled: Ack when it was handled, Nack
// to retry, park or skip it. Here a message that cannot be handled is
// parked at once (for an operator to replay or delete), the others are
// acknowledged.
func ExampleClient_Consume() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := exampleNamespace(ctx, "example-billing")
	defer c.Close()
	for i, amount := range []string{"10", "-5", "7"} {
		data := json.RawMessage(`{"amount":` + amount + `}`)
		if _, err := c.Append(ctx, fmt.Sprintf("charge-%d", i), []client.NewMessage{{Type: "Requested", Data: data}}); err != nil {
			log.Fatal(err)
		}
	}
	settings := client.GroupSettings{AckTimeout: 30 * time.Second}.WithMaxRetries(3)
	if _, err := c.CreateGroup(ctx, client.GroupSpec{Name: "billing", Category: "charge", Settings: settings}); err != nil {
		log.Fatal(err)
	}

	handled := 0
	for d, err := range c.Consume(ctx, "billing", "worker-1") {
		if err != nil {
			log.Fatal(err) // ctx ended, or no such group
		}
		var charge struct{ Amount int }
		if err := json.Unmarshal(d.Data, &charge); err != nil || charge.Amount <= 0 {
			// Retrying would not help: park it, with the reason.
			if err := c.Nack(ctx, "billing", client.NackPark, "amount must be positive", d.ID); err != nil {
				log.Fatal(err)
			}
			fmt.Println("parked", d.Stream, "attempt", d.Attempt)
		} else {
			if err := c.Ack(ctx, "billing", d.ID); err != nil {
				log.Fatal(err)
			}
			fmt.Println("charged", d.Stream, charge.Amount)
		}
		if handled++; handled == 3 {
			break // detaches the consumer
		}
	}
	// Output:
	// charged charge-0 10
	// parked charge-1 attempt 1
	// charged charge-2 7
}

// A backward read returns the newest messages first: Position -1 starts
// at the stream's last message, so Limit N is its last N.
func ExampleClient_ReadStream_backward() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := exampleNamespace(ctx, "example-sensors")
	defer c.Close()
	for i := range 5 {
		data := json.RawMessage(fmt.Sprintf(`{"celsius":%d}`, 20+i))
		if _, err := c.Append(ctx, "sensor-9", []client.NewMessage{{Type: "Measured", Data: data}}); err != nil {
			log.Fatal(err)
		}
	}
	last, err := c.ReadStream(ctx, client.StreamQuery{Stream: "sensor-9", Position: -1, Limit: 2, Backward: true})
	if err != nil {
		log.Fatal(err)
	}
	for _, m := range last {
		fmt.Println(m.Position, string(m.Data))
	}
	// Output:
	// 4 {"celsius":24}
	// 3 {"celsius":23}
}
