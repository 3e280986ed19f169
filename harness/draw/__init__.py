"""What every figure is drawn with, the report's and a lab's (style); below both, which stay apart."""
