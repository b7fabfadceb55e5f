"""AsyncSpade: asynchronous query-aware sparse decoding (work in progress: predictor and selectors).

``predictor`` fits the light-weight temporal regression that predicts the next query from a window
of recent queries; ``selectors`` holds the token selectors compared side by side (oracle top-k,
Quest's page estimate, AsyncSpade's top-k from the predicted query) as torch references.
"""
