"""Studio: the browser page over the engine. Light: gradio, pandas and engine's light modules only (never torch)."""
