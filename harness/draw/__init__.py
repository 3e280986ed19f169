"""What every figure is drawn with, the report's and a lab's (style, and place: where its words go)."""
