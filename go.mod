module github.com/backstop-llm/backstop

go 1.25
