module github.com/backstop-llm/backstop/bench

go 1.25

require (
	github.com/backstop-llm/backstop v0.0.0
	github.com/failsafe-go/failsafe-go v0.9.8
)

require (
	github.com/bits-and-blooms/bitset v1.24.4 // indirect
	github.com/sony/gobreaker/v2 v2.4.0 // indirect
)

replace github.com/backstop-llm/backstop => ../
