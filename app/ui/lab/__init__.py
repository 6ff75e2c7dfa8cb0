"""The Quant lab page: the variant picker, the results table, the charts, past results and the uploaders dialog."""
