module fenced/client

go 1.19
