def probe():
    return None
