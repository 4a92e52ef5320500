"""One module per tab: layout + event wiring; handlers are plain functions tested without a browser."""
